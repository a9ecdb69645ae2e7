#!/usr/bin/env bash
# The DLPerf benchmark matrix: bert_pretrain or gpt_pretrain under mpirun, one process per device,
# for each case (1n1g, 1n4g, 1n8g, 2n8g, 4n8g, or the subset the hosts allow; or cases with a
# tensor × pipeline × data layout), repeated --runs times, each run's output (rank 0's stdout +
# mpirun's stderr) in
#   <log-root>/<model>/bs<B>_<precision>/<case>/run<k>.log       <case> = 1n8g, or 1n8g_tp2pp4 etc.
# which scripts/extract_logs.py turns into result.json and table.md, and scripts/plot_throughput.py
# into a plot. run_single_node.sh and run_multi_node.sh are this script (multi-node: --hostfile, or
# --slurm inside a Slurm allocation).
#
# Usage: scripts/run_single_node.sh --data SHARDS [options] [-- trainer options]
#        scripts/run_multi_node.sh --hostfile FILE --data SHARDS [options] [-- trainer options]
#        scripts/run_multi_node.sh --slurm --data SHARDS [options] [-- trainer options]   # in sbatch/salloc
# Options:
#   --data PATH          shards (directory or manifest.json), the trainer's --data; required
#   --model bert|gpt     which trainer (default bert)
#   --model-size S       the trainer's --model (default: bert base, gpt 124M)
#   --batch-size B       the trainer's --batch-size: samples per micro-batch per data-parallel rank
#                        (default: bert 32, gpt 8). Pure data parallel: per device per step.
#   --precision P        fp32, bf16 or fp16 (default fp32)
#   --steps N            steps per run (default 120: extract_logs.py skips 20, averages 100)
#   --runs K             runs per case (default 5)
#   --device cuda|cpu    default cuda when nvidia-smi lists a GPU, else cpu
#   --gpus-per-node G    devices (= ranks) per node, the largest "g" of the matrix. Default: the GPUs
#                        nvidia-smi lists (cuda), the hostfile's slots on its first host (multi-node),
#                        or nproc (cpu). With --device cpu a "g" is one CPU rank.
#   --threads T          --threads per rank (default 1 on cpu; the trainer's default on cuda)
#   --hostfile FILE      OpenMPI hostfile, one host per line ("host" or "host slots=G"); N-node cases
#                        run on its first N hosts with `mpirun --hostfile … -npernode G`
#   --slurm              inside a Slurm allocation (sbatch, salloc; scripts/slurm/dlperf.sbatch): the
#                        nodes are the allocation's (SLURM_JOB_NODELIST through `scontrol show
#                        hostnames`, or SLURM_JOB_NUM_NODES), G defaults to SLURM_GPUS_ON_NODE or
#                        SLURM_NTASKS_PER_NODE, and each case runs as `srun --nodes N --ntasks N×G
#                        --ntasks-per-node G --mpi=pmix --kill-on-bad-exit=1` (Debian's OpenMPI
#                        speaks PMIx); --mpi-args then goes to srun. Implied when SLURM_JOB_ID is set
#                        and there is no --hostfile.
#   --cases LIST         cases instead of the default matrix, separated by commas or spaces:
#                        <N>n<G>g[:LAYOUT], e.g. "1n1g,1n8g,2n8g" or "1n8g:dp8 1n8g:tp2pp4 2n8g:tp4pp2dp2"
#   --log-root DIR       default logs
#   --build-dir DIR      where bert_pretrain/gpt_pretrain are built (default $PRETRAIN_BUILD_DIR or build/)
#   --mpi-args "ARGS"    more mpirun arguments (e.g. "-x NCCL_DEBUG=INFO --mca btl_tcp_if_include ib0").
#                        With --hostfile, mpirun also gets --mca oob_tcp_keepalive_time 30,
#                        oob_tcp_keepalive_intvl 5 and oob_tcp_keepalive_probes 6 (a lost host ends
#                        the job within a minute), each unless given here or as OMPI_MCA_… variable
#   --abort-grace S      seconds a launcher may still run after it said it aborted the job (a rank
#                        failed, a host lost) before it is ended (default 30; see "A lost host" below)
#   --dry-run            print the cases, their layouts and commands, run nothing
# Anything after -- goes to the trainer (e.g. -- --recompute --seq-len 512, -- --grad-accum 4).
#
# Layouts. LAYOUT is any of tpT (tensor parallel), ppP (pipeline parallel), dpD (data parallel),
# vV (virtual stages per pipeline stage: the interleaved schedule) and sp (sequence parallel), in any
# order, e.g. 1n8g:tp2pp4, 2n8g:tp4pp2dp2, 1n4g:tp2pp2v2sp. Unwritten tp/pp are 1; data parallel is
# N×G/(T×P), and a written dpD must equal it. The case passes --tensor-parallel T
# --pipeline-parallel P [--virtual-stages V] [--sequence-parallel] to the trainer and logs into
# <N>n<G>g_<layout> (the parts written, in the order tp pp dp v sp: 1n8g_tp2pp4); a plain <N>n<G>g
# is pure data parallel as before, logged in <N>n<G>g/. Refused (exit 2, naming the numbers): T×P
# that does not divide N×G, a dpD that disagrees, vV without ppP > 1, sp without tpT > 1; the
# trainer itself refuses layers or heads that do not divide.
# Batches. Global batch = B × grad-accum × data parallel (Megatron's micro-batch × accumulation ×
# DP, as the trainer's config line reports it): at a fixed --batch-size a case with T×P > 1 trains
# a smaller global batch than pure data parallel on the same devices. A step of a pipeline case
# runs the trainer's --grad-accum micro-batches through 1F1B: with fewer micro-batches than stages
# the pipeline never fills (idle fraction (P−1)/(m+P−1) for m micro-batches), so pass
# `-- --grad-accum M` with M ≥ P (M ≥ 4P to keep the bubble under 20%); interleaving (vV) needs M a
# multiple of P. The plan warns when M < P and refuses a multiple the interleaved schedule rejects.
#
# The default matrix, DLPerf's generalised: on one node G in {1, 4, 8} up to --gpus-per-node, plus
# --gpus-per-node itself (so 2 CPU ranks per node give 1n1g, 1n2g; 8 GPUs give 1n1g, 1n4g, 1n8g);
# with a hostfile of H hosts also N in {2, 4, 8, …} up to H, plus H, at G = --gpus-per-node
# (4 hosts × 8 GPUs: 1n1g 1n4g 1n8g 2n8g 4n8g). A run that fails stops the matrix: its log is kept as
# run<k>.log.failed and named; a finished run's log is written as run<k>.log.partial and renamed.
# Multi-node needs the binaries and data at the same paths on every host (a shared file system).
#
# A lost host. With --hostfile mpirun hears of a host it lost (link down, machine gone) through TCP
# keepalive on its channel to that host's daemon: 30 s of quiet, then 6 probes 5 s apart, so the job
# ends 30-60 s after the loss naming the host ("lost communication with a remote daemon … on node
# H"), and rides out an outage shorter than 30 s. A rank's --comm-timeout (trainers: 300 s) should
# stay above that: when a rank's watchdog ends first, mpirun aborts the job but then waits to
# deliver its kill order to the lost host's daemon, and a connection with data in flight is timed
# by TCP retransmission (net.ipv4.tcp_retries2, ~15 minutes at Linux's default 15), not keepalive.
# So once the launcher's output says the job was aborted, it gets --abort-grace seconds to exit, and
# is then ended (SIGTERM: mpirun 4.1 then gives up on the lost daemon and exits within a second or
# two; SIGKILL 10 s later if not), its run failing as any failed run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model=bert model_size="" batch="" precision=fp32 steps=120 runs=5 data="" device="" gpn="" threads=""
hostfile="" cases="" log_root=logs build_dir=${PRETRAIN_BUILD_DIR:-$root/build} mpi_args="" dry_run=0 slurm=0
abort_grace=30
trainer_args=()
die() { echo "$(basename "$0"): $*" >&2; exit 2; }
need() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --model) need "$@"; model=$2; shift 2 ;;
    --model-size) need "$@"; model_size=$2; shift 2 ;;
    --batch-size) need "$@"; batch=$2; shift 2 ;;
    --precision) need "$@"; precision=$2; shift 2 ;;
    --steps) need "$@"; steps=$2; shift 2 ;;
    --runs) need "$@"; runs=$2; shift 2 ;;
    --data) need "$@"; data=$2; shift 2 ;;
    --device) need "$@"; device=$2; shift 2 ;;
    --gpus-per-node) need "$@"; gpn=$2; shift 2 ;;
    --threads) need "$@"; threads=$2; shift 2 ;;
    --hostfile) need "$@"; hostfile=$2; shift 2 ;;
    --slurm) slurm=1; shift ;;
    --cases) need "$@"; cases=$2; shift 2 ;;
    --log-root) need "$@"; log_root=$2; shift 2 ;;
    --build-dir) need "$@"; build_dir=$2; shift 2 ;;
    --mpi-args) need "$@"; mpi_args=$2; shift 2 ;;
    --abort-grace) need "$@"; abort_grace=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; trainer_args=("$@"); break ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }
[[ -n $data ]] || die "--data SHARDS is required"
[[ $dry_run == 1 || -e $data ]] || die "--data $data: no such file or directory"
case $model in
  bert) : "${model_size:=base}" "${batch:=32}" ;;
  gpt) : "${model_size:=124M}" "${batch:=8}" ;;
  *) die "--model must be bert or gpt, got '$model'" ;;
esac
case $precision in fp32|bf16|fp16) ;; *) die "--precision must be fp32, bf16 or fp16, got '$precision'" ;; esac
positive --batch-size "$batch"; positive --steps "$steps"; positive --runs "$runs"
[[ $abort_grace =~ ^[0-9]+$ ]] || die "--abort-grace must be a whole number of seconds, got '$abort_grace'"

if [[ -z $device ]]; then
  if command -v nvidia-smi >/dev/null && [[ $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') -gt 0 ]]; then
    device=cuda
  else
    device=cpu
  fi
fi
[[ $device == cpu || $device == cuda ]] || die "--device must be cuda or cpu, got '$device'"
[[ $device == cpu && -z $threads ]] && threads=1
[[ -z $threads ]] || positive --threads "$threads"

# Hosts, in hostfile order, without repeats; slots of the first host. Under Slurm: the allocation's.
hosts=() first_slots=""
[[ $slurm == 0 && -z $hostfile && -n ${SLURM_JOB_ID:-} ]] && slurm=1
if [[ $slurm == 1 ]]; then
  [[ -z $hostfile ]] || die "--slurm and --hostfile: the allocation gives the hosts, pass one or the other"
  [[ -n ${SLURM_JOB_NODELIST:-}${SLURM_JOB_NUM_NODES:-} ]] ||
    die "--slurm: no SLURM_JOB_NODELIST or SLURM_JOB_NUM_NODES: run it inside sbatch or salloc"
  if [[ -n ${SLURM_JOB_NODELIST:-} ]] && command -v scontrol >/dev/null; then
    mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  else  # no scontrol (a dry run elsewhere): the nodes are only counted
    for ((i = 0; i < ${SLURM_JOB_NUM_NODES:-1}; ++i)); do hosts+=("node$i"); done
  fi
  [[ ${#hosts[@]} -gt 0 ]] || die "--slurm: the allocation lists no nodes"
  first_slots=${SLURM_GPUS_ON_NODE:-${SLURM_NTASKS_PER_NODE%%(*}}
elif [[ -n $hostfile ]]; then
  [[ -r $hostfile ]] || die "--hostfile $hostfile: cannot read it"
  while read -r host rest; do
    [[ -z $host || $host == \#* ]] && continue
    if [[ ${#hosts[@]} -eq 0 && $rest =~ slots=([0-9]+) ]]; then first_slots=${BASH_REMATCH[1]}; fi
    [[ " ${hosts[*]} " == *" $host "* ]] || hosts+=("$host")
  done <"$hostfile"
  [[ ${#hosts[@]} -gt 0 ]] || die "--hostfile $hostfile: no hosts in it"
fi
max_nodes=$(( ${#hosts[@]} > 0 ? ${#hosts[@]} : 1 ))

if [[ -z $gpn ]]; then
  if [[ $device == cuda ]] && command -v nvidia-smi >/dev/null; then gpn=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
  [[ -z $gpn || $gpn == 0 ]] && gpn=$first_slots
  [[ -z $gpn && $device == cpu ]] && gpn=$(nproc)
  [[ -n $gpn && $gpn != 0 ]] || die "cannot tell how many GPUs a node has: pass --gpus-per-node"
fi
positive --gpus-per-node "$gpn"

# The matrix.
if [[ -z $cases ]]; then
  list=()
  for g in 1 4 8; do (( g < gpn )) && list+=("1n${g}g"); done
  list+=("1n${gpn}g")
  for n in 2 4 8 16 32 64; do (( n < max_nodes )) && list+=("${n}n${gpn}g"); done
  (( max_nodes > 1 )) && list+=("${max_nodes}n${gpn}g")
  cases=$(IFS=,; echo "${list[*]}")
fi
# The trainer's --grad-accum (micro-batches per step), for the pipeline checks; layout flags after --
# would fight the cases' own.
accum=1
for ((i = 0; i < ${#trainer_args[@]}; ++i)); do
  a=${trainer_args[i]}
  case $a in
    --grad-accum) accum=${trainer_args[i + 1]:-}; positive "--grad-accum (after --)" "$accum" ;;
    --grad-accum=*) accum=${a#*=}; positive "--grad-accum (after --)" "$accum" ;;
    --tensor-parallel|--tensor-parallel=*|--tensor-model-parallel-size*|--pipeline-parallel|--pipeline-parallel=*|\
    --pipeline-model-parallel-size*|--virtual-stages*|--sequence-parallel)
      die "${a%%=*} after -- conflicts with the cases' layouts: write it in the case (e.g. 1n8g:tp2pp4v2sp)" ;;
    --log-interval|--log-interval=*|--max-steps|--max-steps=*)
      die "${a%%=*} after -- is the matrix's own (--log-interval 1: extract_logs.py averages every step; --steps sets --max-steps)" ;;
  esac
done

# One case: <N>n<G>g[:LAYOUT] -> n g tp pp dp vs sp (0/1), dir (the log directory's name) and layout
# (the canonical layout, empty for a plain case).
parse_case() {
  local c=$1 rest tok written=""
  [[ $c =~ ^([1-9][0-9]*)n([1-9][0-9]*)g(:(.*))?$ ]] ||
    die "--cases: '$c' is not <N>n<G>g or <N>n<G>g:LAYOUT (LAYOUT: tpT ppP dpD vV sp, e.g. 1n8g:tp2pp4)"
  n=${BASH_REMATCH[1]} g=${BASH_REMATCH[2]} rest=${BASH_REMATCH[4]}
  tp=1 pp=1 dp="" vs=1 sp=0 layout=""
  if [[ -n ${BASH_REMATCH[3]} && -z $rest ]]; then die "--cases: '$c' has an empty layout after ':'"; fi
  while [[ -n $rest ]]; do
    if [[ $rest =~ ^(tp|pp|dp|v)([1-9][0-9]*)(.*)$ ]]; then
      tok=${BASH_REMATCH[1]}
      [[ " $written " != *" $tok "* ]] || die "--cases: '$c' gives $tok twice"
      case $tok in tp) tp=${BASH_REMATCH[2]} ;; pp) pp=${BASH_REMATCH[2]} ;; dp) dp=${BASH_REMATCH[2]} ;; v) vs=${BASH_REMATCH[2]} ;; esac
      rest=${BASH_REMATCH[3]}
    elif [[ $rest == sp* ]]; then
      tok=sp
      [[ " $written " != *" sp "* ]] || die "--cases: '$c' gives sp twice"
      sp=1 rest=${rest#sp}
    else
      die "--cases: '$c': cannot read '$rest' (a layout is tpT ppP dpD vV sp with positive integers, e.g. 1n4g:tp2pp2v2sp)"
    fi
    written+=" $tok"
  done
  local devices=$((n * g))
  (( devices % (tp * pp) == 0 )) ||
    die "case $c: tensor $tp × pipeline $pp = $((tp * pp)) does not divide the $devices devices of ${n}n${g}g ($n × $g)"
  local derived=$((devices / (tp * pp)))
  [[ -z $dp || $dp == "$derived" ]] ||
    die "case $c: dp$dp, but ${n}n${g}g has $devices devices / (tensor $tp × pipeline $pp) = data parallel $derived"
  dp=$derived
  (( vs == 1 || pp > 1 )) || die "case $c: v$vs (virtual stages) needs pp > 1 (the interleaved schedule)"
  (( sp == 0 || tp > 1 )) || die "case $c: sp (sequence parallel) needs tp > 1"
  (( vs == 1 || accum % pp == 0 )) ||
    die "case $c: the interleaved schedule (v$vs) needs --grad-accum a multiple of pp $pp, got $accum (pass -- --grad-accum $((pp * 2)))"
  [[ " $written " == *" tp "* ]] && layout+=tp$tp
  [[ " $written " == *" pp "* ]] && layout+=pp$pp
  [[ " $written " == *" dp "* ]] && layout+=dp$dp
  [[ " $written " == *" v "* ]] && layout+=v$vs
  [[ " $written " == *" sp "* ]] && layout+=sp
  dir=${n}n${g}g${layout:+_$layout}
  return 0
}

read -r -a case_list <<<"${cases//,/ }"
[[ ${#case_list[@]} -gt 0 ]] || die "--cases: no cases in '$cases'"
dirs=" "
for c in "${case_list[@]}"; do
  parse_case "$c"
  (( n <= max_nodes )) || die "case $c needs $n nodes, the hosts allow $max_nodes${hostfile:+ ($hostfile)}"
  (( g <= gpn )) || die "case $c needs $g devices per node, --gpus-per-node is $gpn"
  [[ $dirs != *" $dir "* ]] || die "--cases: '$c' is listed twice (log directory $dir)"
  dirs+="$dir "
  if (( pp > 1 && accum < pp )); then
    echo "$(basename "$0"): warning: case $c: --grad-accum $accum < pp $pp, the 1F1B pipeline never fills" \
      "(pass -- --grad-accum $((4 * pp)) or more)" >&2
  fi
  if (( tp > 1 && g % tp != 0 && n > 1 )); then
    echo "$(basename "$0"): warning: case $c: tp $tp does not divide the $g devices per node, tensor groups span nodes" >&2
  fi
done

trainer=$build_dir/trainer/${model}_pretrain
[[ $dry_run == 1 || -x $trainer ]] || die "$trainer not built (cmake --build build --target ${model}_pretrain, or --build-dir)"
if [[ $slurm == 1 ]]; then
  command -v srun >/dev/null || [[ $dry_run == 1 ]] || die "--slurm: srun not found"
elif ! command -v mpirun >/dev/null && [[ $dry_run == 0 ]]; then
  die "mpirun not found (apt-get install openmpi-bin)"
fi
mpi=(mpirun --oversubscribe)
if [[ $slurm == 0 && $(id -u) == 0 ]]; then
  mpi+=(--allow-run-as-root)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Across hosts, mpirun hears of a host it lost (its daemon's link down, the machine gone) only from
# TCP keepalive on its channel to that daemon, which OpenMPI's defaults start after 300 s of quiet
# and give up on after 9 probes 20 s apart: a job then waits 8 minutes. 30 s of quiet and 6 probes
# 5 s apart end it within a minute of the loss, naming the host, and ride out an outage under 30 s
# ("A lost host" above). The user's own values (--mpi-args, OMPI_MCA_oob_tcp_keepalive_*) win.
if [[ $slurm == 0 && -n $hostfile ]]; then
  for setting in time=30 intvl=5 probes=6; do
    name=oob_tcp_keepalive_${setting%%=*} env_name=OMPI_MCA_oob_tcp_keepalive_${setting%%=*}
    [[ -n ${!env_name:-} || " $mpi_args " == *" $name "* ]] || mpi+=(--mca "$name" "${setting#*=}")
  done
fi
# shellcheck disable=SC2206  # --mpi-args is split on spaces on purpose
[[ -n $mpi_args ]] && mpi+=($mpi_args)

# What OpenMPI's launchers print when they abort a job: a rank exited non-zero or was killed, a
# rank called MPI_Abort, a daemon (host) was lost.
aborted='the job has been aborted|has lost communication with a remote daemon|noticed that process rank'
aborted+='|MPI_ABORT was invoked'

# watch_launcher PID LOG: ends the launcher PID when it still runs --abort-grace seconds after LOG
# says it aborted the job ("A lost host" above).
watch_launcher() {
  local pid=$1 log=$2 since=""
  while kill -0 "$pid" 2>/dev/null; do
    if [[ -z $since ]] && grep -qE "$aborted" "$log"; then since=$SECONDS; fi
    if [[ -n $since ]] && (( SECONDS - since >= abort_grace )); then
      echo "$(basename "$0"): the launcher still runs $abort_grace s after it aborted the job (a host it cannot" \
        "reach?): ending it (--abort-grace)" >>"$log"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
      kill -KILL "$pid" 2>/dev/null || true
      return 0
    fi
    sleep 1
  done
}

# launch LOG COMMAND...: runs the launch with its output in LOG, watched; its exit status.
launch() {
  local log=$1 pid watcher rc=0
  shift
  : >"$log"
  "$@" >>"$log" 2>&1 &
  pid=$!
  watch_launcher "$pid" "$log" &
  watcher=$!
  wait "$pid" || rc=$?
  kill "$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
  return "$rc"
}

out=$log_root/$model/bs${batch}_${precision}
echo "$model $model_size, batch $batch per data-parallel rank × grad-accum $accum, $precision, $steps steps," \
  "$runs runs, device $device, cases: ${case_list[*]} -> $out/"
for c in "${case_list[@]}"; do
  parse_case "$c"
  if [[ $dry_run == 1 ]]; then
    extra=""
    (( vs > 1 )) && extra+=", $vs virtual stages"
    (( sp )) && extra+=", sequence parallel"
    echo "$c: $((n * g)) rank$( ((n * g > 1)) && echo s) = tensor $tp × pipeline $pp × data $dp$extra; global batch $((batch * accum * dp))" \
      "= $batch × grad-accum $accum × data $dp -> $out/$dir/"
  fi
  launch=("${mpi[@]}" -np $((n * g)))
  if [[ $slurm == 1 ]]; then
    # srun places g tasks on each of n nodes of the allocation; a failed rank ends the step.
    launch=(srun --nodes "$n" --ntasks $((n * g)) --ntasks-per-node "$g" --mpi=pmix --kill-on-bad-exit=1)
    # shellcheck disable=SC2206  # --mpi-args is split on spaces on purpose
    [[ -n $mpi_args ]] && launch+=($mpi_args)
  elif [[ -n $hostfile ]]; then
    # The first n hosts, g slots each; -npernode places g ranks on each.
    sub=$out/$dir/hostfile
    [[ $dry_run == 1 ]] || { mkdir -p "$out/$dir"; printf '%s slots='"$g"'\n' "${hosts[@]:0:n}" >"$sub"; }
    launch+=(--hostfile "$sub" -npernode "$g")
  fi
  cmd=("${launch[@]}" "$trainer" --data "$data" --model "$model_size" --batch-size "$batch" --precision "$precision"
       --max-steps "$steps" --device "$device" --log-interval 1)
  [[ -n $threads ]] && cmd+=(--threads "$threads")
  if [[ -n $layout ]]; then
    cmd+=(--tensor-parallel "$tp" --pipeline-parallel "$pp")
    (( vs > 1 )) && cmd+=(--virtual-stages "$vs")
    (( sp )) && cmd+=(--sequence-parallel)
  fi
  cmd+=(${trainer_args[@]+"${trainer_args[@]}"})
  for ((k = 1; k <= runs; ++k)); do
    log=$out/$dir/run$k.log
    if [[ $dry_run == 1 ]]; then echo "$log: ${cmd[*]}"; continue; fi
    mkdir -p "$out/$dir"
    printf '%s run %d/%d ... ' "$c" "$k" "$runs"
    start=$SECONDS
    rc=0
    launch "$log.partial" "${cmd[@]}" || rc=$?
    if [[ $rc == 0 ]]; then
      mv "$log.partial" "$log"
      echo "$((SECONDS - start)) s, $(grep '^summary:' "$log" | sed 's/.*| \([0-9.]* samples\/s\) |.*/\1/' || true)"
    else
      mv "$log.partial" "$log.failed"
      echo "failed (exit $rc): $log.failed" >&2
      tail -n 15 "$log.failed" >&2
      echo "command: ${cmd[*]}" >&2
      exit 1
    fi
  done
done
[[ $dry_run == 1 ]] || echo "logs in $out/ (scripts/extract_logs.py $out)"
