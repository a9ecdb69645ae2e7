// pretrain_common: what every stage shares. See each header for the details.
#pragma once
#include "common/cli.h"
#include "common/device.h"
#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/model_kind.h"
#include "common/progress.h"
#include "common/utf8.h"
