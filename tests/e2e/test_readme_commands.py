"""The manual cannot drift from the code: every command shown in a shell code block of README.md and
docs/*.md (docs/tools.md and docs/training.md among them) names a program that exists and uses only
flags that program accepts.

  * Code blocks: fenced with ``` or ~~~, untagged or tagged sh/bash/shell/console. Blocks tagged
    text, python, cpp, c, cmake, json (diagrams, program output, code) are not commands.
  * A line: `\\` continuations joined, `# comments` dropped, `$(…)` substitutions blanked, split
    into commands at `|`, `&&`, `||`, `;` and `&`, redirections (`< f`, `> f`, `2>&1`) dropped,
    leading VAR=value assignments and wrappers (time, env, nohup, sudo, exec) skipped, and
    `mpirun`/`mpiexec` with its own options (`-np N`, `--hostfile F`, `-x VAR`, `--mca K V`, …)
    skipped to the program it launches.
  * The program: one of our tools (wikiprep, make-pretraining-shards, tokenize, train-tokenizer,
    shard-tool, bert_pretrain, gpt_pretrain; at any path: `build/trainer/bert_pretrain` is
    bert_pretrain) must be built in PRETRAIN_BUILD_DIR, a benchmark driver `bench_*` in its bench/;
    a script under scripts/ (run directly, or through python3 / .venv/bin/python / bash) must exist
    in PRETRAIN_SOURCE_DIR. Programs that are not ours (cmake, ctest, pip, cc, sbatch, export,
    python -c, tensorboard, …) are in SKIPPED; their `scripts/…` arguments must still exist. Any
    other program fails: a misspelt or renamed tool is reported, never skipped.
  * Its flags: every `--flag` (and `-x` short flag) the command uses must appear in the program's
    help: the tool's `--help` (shard-tool: the subcommand's `--help`, and the subcommand must
    exist), a Python script's `--help` (argparse; its add_argument calls when it cannot run here),
    a shell script's leading comment block, plus its `--help` output when it handles --help (a case
    arm for it; never run otherwise, since a script that does not would start its work), plus
    the help of the script it execs with all its arguments (run_single_node.sh → dlperf_matrix.sh,
    chaos.sh → chaos.py). For the DLPerf scripts (run_single_node.sh,
    run_multi_node.sh, dlperf_matrix.sh) the options after `--` are the trainer's and are checked
    against bert_pretrain's or gpt_pretrain's help (by --model).
A self-test first feeds fake snippets through the same checker (a flag a tool lacks, a misspelt tool,
an unknown subcommand, a wrong trainer flag after `--`, …) and fails unless each is reported.
Exit 77 (skip) without PRETRAIN_BUILD_DIR.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("PRETRAIN_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("PRETRAIN_BUILD_DIR")

# Our commands and where the build puts them.
TOOLS = {
    "wikiprep": "datagen/wikiprep",
    "dedup": "datagen/dedup",
    "make-pretraining-shards": "datagen/make-pretraining-shards",
    "tokenize": "tokenizer/tokenize",
    "train-tokenizer": "tokenizer/train-tokenizer",
    "shard-tool": "formats/shard-tool",
    "bert_pretrain": "trainer/bert_pretrain",
    "gpt_pretrain": "trainer/gpt_pretrain",
}
SUBCOMMAND_TOOLS = {"shard-tool"}
# Scripts whose options after `--` go to a trainer.
TRAINER_PASSTHROUGH = {"run_single_node.sh", "run_multi_node.sh", "dlperf_matrix.sh"}
# Programs that are not ours: shown in the manual, not checked (but their scripts/ arguments are).
SKIPPED = {
    "apt-get", "bzip2", "c++", "cat", "cc", "cd", "clang", "clang++", "cmake", "cmp", "cp", "ctest", "curl",
    "diff", "echo", "export", "g++", "gcc", "git", "grep", "gzip", "h5dump", "h5ls", "head", "jq", "lbzip2",
    "less", "ls", "mkdir", "mv", "nvidia-smi", "pip", "pip3", "pkg-config", "rm", "salloc", "sbatch", "scontrol",
    "sed", "sort", "source", "spm_encode", "squeue", "srun", "tail", "tar", "tee", "tensorboard", "true",
    "uniq", "wc", "wget", "xargs", "zstd",
}
PYTHONS = {"python", "python3", "/usr/bin/python3", ".venv/bin/python", ".venv/bin/python3"}
WRAPPERS = {"time", "nohup", "sudo", "exec", "env"}
LAUNCHERS = {"mpirun", "mpiexec", "orterun"}
# mpirun options that take a value (two for --mca); any other option is taken as a switch.
MPIRUN_VALUE_OPTIONS = {
    "-np", "-n", "--np", "-c", "-H", "--host", "-host", "--hostfile", "-hostfile", "--machinefile",
    "-machinefile", "-npernode", "--npernode", "-N", "--map-by", "--bind-to", "--rank-by", "-x", "--wdir",
    "-wdir", "--prefix", "--output-filename", "--timeout", "--display-map-file",
}
MPIRUN_TWO_VALUE_OPTIONS = {"--mca", "-mca", "--gmca", "-gmca"}
COMMAND_LANGUAGES = {"", "sh", "bash", "shell", "console"}
LONG_FLAG = re.compile(r"^(--[A-Za-z0-9][A-Za-z0-9_-]*)(=.*)?$")
SHORT_FLAG = re.compile(r"^-[A-Za-z]$")
HELP_LONG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
HELP_SHORT = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")
SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}


class Checker:
    def __init__(self, src, build):
        self.src, self.build = src, build
        self.help_cache = {}

    # ------------------------------------------------------------ help texts
    def run_help(self, argv, env_extra=None):
        env = dict(os.environ, **(env_extra or {}))
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=self.src)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, str(e)
        out = r.stdout + r.stderr
        return (out if r.returncode == 0 else None), f"exit {r.returncode}: {out[-400:]}"

    def tool_help(self, path, sub=None):
        key = ("tool", path, sub)
        if key not in self.help_cache:
            argv = [path] + ([sub] if sub else []) + ["--help"]
            text, why = self.run_help(argv)
            self.help_cache[key] = (text, why)
        return self.help_cache[key]

    def subcommands(self, path):
        text, why = self.tool_help(path)
        if text is None:
            return None, why
        names, inside = set(), False
        for line in text.splitlines():
            if re.match(r"^\s*SUBCOMMANDS:?\s*$", line, re.I):
                inside = True
                continue
            if inside:
                m = re.match(r"^\s+([A-Za-z][\w-]*)\b", line)
                if m:
                    names.add(m.group(1))
                elif line.strip() and not line.startswith(" "):
                    inside = False
        return names, None

    def leading_comment(self, path):
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
        out = []
        for line in lines[1:] if lines and lines[0].startswith("#!") else lines:
            if not line.startswith("#"):
                break
            out.append(line)
        return "\n".join(out)

    def python_help(self, path, interpreter):
        key = ("py", path)
        if key in self.help_cache:
            return self.help_cache[key]
        text, why = self.run_help([interpreter, path, "--help"])
        if text is None:
            # Cannot run here (a module the interpreter lacks): the flags its argparse declares.
            source = open(path, encoding="utf-8", errors="replace").read()
            declared = re.findall(r"add_argument\(\s*((?:[\"'][^\"']*[\"']\s*,?\s*)+)", source)
            if declared:
                text = source[:source.find('"""', 3) + 3] if source.count('"""') >= 2 else ""
                text += "\n" + " ".join(declared)
                why = None
        self.help_cache[key] = (text, why)
        return text, why

    def shell_help(self, path):
        key = ("sh", path)
        if key in self.help_cache:
            return self.help_cache[key]
        text = self.leading_comment(path)
        source = open(path, encoding="utf-8", errors="replace").read()
        why = None
        # Run it only when it handles --help itself (a case arm or a test for it): a script that
        # does not would take --help for an argument and start its real work.
        if re.search(r"--help\)|[\"']--help[\"']|==\s*--help", source):
            out, why = self.run_help(["bash", path, "--help"], {"PRETRAIN_BUILD_DIR": self.build})
            if out is None:
                text = None
            else:
                text += "\n" + out
        # A wrapper that hands all its arguments to another script takes that script's options too.
        for sh in re.findall(r"exec\s+\"?\$\(dirname \"\$0\"\)/([\w./-]+\.sh)\"?\s+\"\$@\"", source):
            target = os.path.normpath(os.path.join(os.path.dirname(path), sh))
            if text is not None and target != os.path.normpath(path) and os.path.isfile(target):
                more, why2 = self.shell_help(target)
                if more is None:
                    text, why = None, why2
                else:
                    text += "\n" + more
        for py in re.findall(r"exec\s+\S*python\S*\s+(scripts/\S+\.py)\s+\"\$@\"", source):
            if text is not None:
                more, why2 = self.python_help(os.path.join(self.src, py), "/usr/bin/python3")
                if more is None:
                    text, why = None, why2
                else:
                    text += "\n" + more
        self.help_cache[key] = (text, why)
        return text, why

    # ------------------------------------------------------------ parsing
    @staticmethod
    def code_blocks(markdown):
        """(first line number, language, lines) of each fenced code block."""
        blocks, lines, i = [], markdown.splitlines(), 0
        while i < len(lines):
            m = re.match(r"^\s*(```|~~~)\s*([\w+-]*)", lines[i])
            if not m:
                i += 1
                continue
            fence, lang, start, body = m.group(1), m.group(2).lower(), i + 2, []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence):
                body.append(lines[i])
                i += 1
            blocks.append((start, lang, body))
            i += 1
        return blocks

    @staticmethod
    def logical_lines(start, body):
        """(line number, text) with continuations joined."""
        out, pending, first = [], "", None
        for n, line in enumerate(body, start):
            if first is None:
                first = n
            stripped = line.rstrip()
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            out.append((first, pending + line))
            pending, first = "", None
        if pending.strip():
            out.append((first, pending))
        return out

    @staticmethod
    def commands(text):
        """The simple commands of a line: lists of words, redirections and separators removed."""
        text = re.sub(r"^\s*\$\s+", "", text)  # a console prompt
        text = re.sub(r"\$\([^()]*\)", "SUBST", text)
        text = re.sub(r"`[^`]*`", "SUBST", text)
        lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        words = list(lexer)
        cmds, cur, skip_next = [], [], False
        for w in words:
            if skip_next:
                skip_next = False
                continue
            if w in SEPARATORS:
                if cur:
                    cmds.append(cur)
                cur = []
            elif w and set(w) <= set("<>&"):
                if cur and cur[-1].isdigit():
                    cur.pop()  # the fd of 2> or 2>&1
                skip_next = True
            else:
                cur.append(w)
        if cur:
            cmds.append(cur)
        return cmds

    # ------------------------------------------------------------ checking
    def resolve(self, words):
        """(kind, program path, argument words, label, interpreter) of a command. kind: tool, python, shell,
        skip (not ours), unknown, or none (no program: only assignments)."""
        i = 0
        while i < len(words):
            w = words[i]
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
                i += 1
            elif w in WRAPPERS:
                i += 1
                while w == "env" and i < len(words) and words[i].startswith("-"):
                    i += 1
            elif os.path.basename(w) in LAUNCHERS:
                i += 1
                while i < len(words) and words[i].startswith("-"):
                    opt = words[i].split("=", 1)[0]
                    if "=" in words[i]:
                        i += 1
                    elif opt in MPIRUN_TWO_VALUE_OPTIONS:
                        i += 3
                    elif opt in MPIRUN_VALUE_OPTIONS:
                        i += 2
                    else:
                        i += 1
            else:
                break
        if i >= len(words):
            return "none", None, [], "", None
        prog, args = words[i], words[i + 1:]
        name = os.path.basename(prog)
        if prog in PYTHONS or name in ("python", "python3"):
            if args and args[0] in ("-c", "-m"):
                return "skip", None, args, prog, None
            script = next((a for a in args if not a.startswith("-")), None)
            if script and script.endswith(".py") and ("scripts/" in script or "tests/" in script):
                interp = os.path.join(self.src, ".venv/bin/python") if prog.startswith(".venv/") else "/usr/bin/python3"
                if not os.path.exists(interp):
                    interp = "/usr/bin/python3"
                return "python", self.source_path(script), args[args.index(script) + 1:], script, interp
            return "skip", None, args, prog, None
        if name == "bash" or name == "sh":
            script = next((a for a in args if not a.startswith("-")), None)
            if script and "scripts/" in script:
                return "shell", self.source_path(script), args[args.index(script) + 1:], script, None
            return "skip", None, args, prog, None
        if name in TOOLS:
            return "tool", os.path.join(self.build, TOOLS[name]), args, name, None
        if name.startswith("bench_"):
            return "tool", os.path.join(self.build, "bench", name), args, name, None
        if "scripts/" in prog or prog.startswith("./scripts"):
            path = self.source_path(prog)
            if prog.endswith(".py"):
                return "python", path, args, prog, "/usr/bin/python3"
            return "shell", path, args, prog, None
        if name in SKIPPED:
            return "skip", None, args, prog, None
        return "unknown", None, args, prog, None

    def source_path(self, p):
        p = p.strip("\"'")
        k = p.find("scripts/")
        if k < 0:
            k = p.find("tests/")
        return os.path.join(self.src, p[k:])

    @staticmethod
    def flags_of(args):
        """The flags a command uses before a bare `--`, and the words after it."""
        used, rest = [], []
        for j, a in enumerate(args):
            if a == "--":
                rest = args[j + 1:]
                break
            a = a.strip("[]")
            m = LONG_FLAG.match(a)
            if m:
                used.append(m.group(1))
            elif SHORT_FLAG.match(a):
                used.append(a)
        return used, rest

    @staticmethod
    def missing(used, help_text):
        longs = set(HELP_LONG.findall(help_text))
        shorts = set(HELP_SHORT.findall(help_text))
        return [f for f in used if f not in (longs if f.startswith("--") else shorts)]

    def check_command(self, words):
        """Problems with one command (empty: fine) and a label for the report."""
        kind, path, args, label, interpreter = self.resolve(words)
        problems = []
        if kind == "none":
            return [], ""
        if kind == "unknown":
            return [f"unknown program '{label}': not one of our tools ({', '.join(sorted(TOOLS))}), not a script "
                    f"under scripts/, not in the list of programs that are not ours"], label
        if kind == "skip":
            for a in args:
                if a.startswith("scripts/") and not os.path.exists(self.source_path(a)):
                    problems.append(f"{label}: no such file {a}")
            return problems, label + " (skipped)"
        if kind in ("python", "shell"):
            if not os.path.isfile(path):
                return [f"no such script {label} (looked for {path})"], label
        elif not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return [f"{label} is not built: no {path} (PRETRAIN_BUILD_DIR={self.build})"], label
        used, rest = self.flags_of(args)
        if kind == "tool" and label in SUBCOMMAND_TOOLS:
            positional = [a for a in args if not a.startswith("-")]
            sub = positional[0] if positional else None
            names, why = self.subcommands(path)
            if names is None:
                return [f"{label} --help failed: {why}"], label
            if sub is None or sub not in names:
                return [f"{label}: unknown subcommand '{sub}' (its --help lists {', '.join(sorted(names))})"], label
            before = args[:args.index(sub)]
            main_used, _ = self.flags_of(before)
            sub_used, rest = self.flags_of(args[args.index(sub) + 1:])
            main_text, _ = self.tool_help(path)
            sub_text, why = self.tool_help(path, sub)
            if sub_text is None:
                return [f"{label} {sub} --help failed: {why}"], label
            bad = self.missing(main_used, main_text) + self.missing(sub_used, sub_text)
            label = f"{label} {sub}"
        else:
            if kind == "tool":
                text, why = self.tool_help(path)
            elif kind == "python":
                text, why = self.python_help(path, interpreter)
            else:
                text, why = self.shell_help(path)
            if text is None:
                return [f"{label}: its help could not be read ({why})"], label
            bad = self.missing(used, text)
        problems += [f"{label} does not accept {f} (not in its help)" for f in bad]
        if kind == "shell" and os.path.basename(path) in TRAINER_PASSTHROUGH and rest:
            model = "bert"
            for j, a in enumerate(args):
                if a == "--":
                    break
                if a == "--model" and j + 1 < len(args):
                    model = args[j + 1]
                elif a.startswith("--model="):
                    model = a.split("=", 1)[1]
            trainer = f"{model}_pretrain"
            if trainer not in TOOLS:
                problems.append(f"{label}: --model {model} names no trainer")
            else:
                tpath = os.path.join(self.build, TOOLS[trainer])
                text, why = self.tool_help(tpath)
                if text is None:
                    problems.append(f"{trainer} --help failed ({why})")
                else:
                    t_used, _ = self.flags_of(rest)
                    problems += [f"{label} passes {f} to {trainer}, which does not accept it"
                                 for f in self.missing(t_used, text)]
        return problems, label

    def check_markdown(self, text, name):
        """[(where, command, problem)] for every problem, and the number of commands checked."""
        problems, checked = [], 0
        for start, lang, body in self.code_blocks(text):
            if lang not in COMMAND_LANGUAGES:
                continue
            for n, line in self.logical_lines(start, body):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    cmds = self.commands(line)
                except ValueError as e:
                    problems.append((f"{name}:{n}", line.strip(), f"cannot parse: {e}"))
                    continue
                for words in cmds:
                    found, label = self.check_command(words)
                    if label and not label.endswith("(skipped)"):
                        checked += 1
                    for p in found:
                        problems.append((f"{name}:{n}", " ".join(words), p))
        return problems, checked


SELF_TEST = [
    # (snippet, what the report must mention; None: no problem at all)
    ("```\nwikiprep dump.xml -o docs/ --no-such-flag\n```", "--no-such-flag"),
    ("```\nmpirun -np 2 --oversubscribe -x A=1 --mca btl self bert_pretrain --data x --warmup-steps 5\n```",
     "--warmup-steps"),
    ("```\nmake-pretraining-shard -i docs/ --tokenizer v.txt -o out/\n```", "unknown program 'make-pretraining-shard'"),
    ("```bash\nbuild/trainer/gpt-pretrain --data x\n```", "unknown program"),
    ("```\nshard-tool verfy shards/\n```", "unknown subcommand 'verfy'"),
    ("```\nshard-tool inspect --no-records 3 a.hdf5\n```", "--no-records"),
    ("```\ncat text.txt | tokenize --tokenizer vocab.txt --bogus-tokens > ids.txt\n```", "--bogus-tokens"),
    ("```\nwikiprep dump.xml \\\n  -o docs/ \\\n  --continued-bogus\n```", "--continued-bogus"),
    ("```\nscripts/run_single_node.sh --data x --model gpt -- --no-such-trainer-flag\n```",
     "--no-such-trainer-flag"),
    ("```\nscripts/run_single_node.sh --data x --no-such-matrix-flag\n```", "--no-such-matrix-flag"),
    ("```\nscripts/extract_logs.py logs/ --no-such-extract-flag\n```", "--no-such-extract-flag"),
    ("```\nscripts/no_such_script.sh --x\n```", "no such script"),
    ("```\nDATA=x sbatch scripts/slurm/no-such.sbatch\n```", "no such file"),
    ("```\ntrain-tokenizer --kind wordpiece --vocab-size 100 -o out/ docs/ -Z\n```", "-Z"),
    ("```\nwikiprep dump.xml -o docs/ --resume   # a comment --not-a-flag\n"
     "python -c \"print('--not-checked')\"\n"
     "OMPI_ALLOW_RUN_AS_ROOT=1 mpirun -np 2 --hostfile hosts make-pretraining-shards -i d -o o --tokenizer v \\\n"
     "  2>&1 | tee log\n"
     "scripts/run_single_node.sh --data x --model gpt -- --grad-accum 8 --seq-len 64\n"
     "shard-tool inspect --records 3 a.hdf5\n```\n"
     "```python\nLoader(x, --anything)\n```\n```text\nbogus-program --bogus\n```", None),
]


def self_test(checker):
    failures = []
    for snippet, expect in SELF_TEST:
        problems, _ = checker.check_markdown(snippet, "self-test")
        text = "\n".join(p for _, _, p in problems)
        if expect is None and problems:
            failures.append(f"a correct snippet was reported: {text}")
        elif expect is not None and expect not in text:
            failures.append(f"the drift '{expect}' was not reported in {snippet!r} (got: {text or 'nothing'})")
    return failures


def main():
    if not BUILD or not os.path.isdir(BUILD):
        print("skip: PRETRAIN_BUILD_DIR is not set (ctest sets it)")
        return 77
    checker = Checker(SRC, BUILD)
    failures = [f"self-test: {f}" for f in self_test(checker)]
    print(f"self-test: {len(SELF_TEST)} snippets, {'all as expected' if not failures else 'FAILED'}")

    files = [os.path.join(SRC, "README.md")] + sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))
    for required in ("README.md", "docs/tools.md", "docs/training.md"):
        if not os.path.isfile(os.path.join(SRC, required)):
            failures.append(f"{required} is missing")
    for path in files:
        name = os.path.relpath(path, SRC)
        problems, checked = checker.check_markdown(open(path, encoding="utf-8").read(), name)
        print(f"{name}: {checked} commands checked, {len(problems)} problem(s)")
        if name in ("README.md", "docs/tools.md", "docs/training.md") and checked == 0:
            failures.append(f"{name}: no command found in its code blocks (is the parser broken?)")
        for where, cmd, problem in problems:
            failures.append(f"{where}: {problem}\n    {cmd}")
    for f in failures:
        print("FAIL: " + f)
    if failures:
        return 1
    print("ok: every command in README.md and docs/ exists and accepts its flags")
    return 0


if __name__ == "__main__":
    sys.exit(main())
