"""Free code: a Python script (one an LLM wrote) run confined in a folder of its own, and scored by the engine.

The API:
  - `check_script(source) -> list[str]`: problems found without running it (syntax errors; imports and calls
    of the network, other programs, native code and dynamic code), one "line N: ..." string each. The step-wise
    coder runs it before each step; `run_script` refuses a script it flags.
  - `write_inputs(dataset, run_folder, validation)`: the task's files in the run folder (below); the folds.
  - `execute_script(source, run_folder, limits) -> sandbox.Outcome`: run a script confined (agent.execution.confine)
    and say how it ended: status "ok", "error", "timeout", "memory" or "crashed"; `value` is the end of what it
    printed, `error` the end of its stderr (its traceback). For a step that writes no predictions yet.
  - `run_script(source, dataset, run_folder, limits, validation) -> ScriptRun`: the whole evaluation: check,
    write the inputs, execute, read and check the predictions, score each fold, and probe for target leakage.
    `agent.evaluator.Evaluator.evaluate_script` turns it into the `Evidence` a verifier judges.
  - `SCRIPT_CONTRACT`: the contract below in words, for a prompt.

The run folder holds what the script reads:
  train.csv            the training rows: every feature column and the target, labels as in the task
  test.csv             the test rows' features (absent when the task has no test set)
  folds.csv            `row,fold`: each training row's (0-based position in train.csv) validation fold, the
                       engine's own folds (runtime.make_folds), so predictions are comparable and blendable
  task.json            target, id_column, task_type, metric, greater_is_better, needs_proba, classes,
                       positive_class, n_splits, seed, the file names, and prediction_columns
and what it must write:
  oof.csv              out-of-fold predictions: `row` and the prediction columns, one line per training row,
                       each predicted by a model fitted on the other folds only
  test_predictions.csv `row` (0-based position in test.csv) and the prediction columns, one line per test row
The prediction columns: one per class named after it (its probability) when the metric scores probabilities,
else `prediction` (a class label, or a value for regression).

The engine computes the metric itself, per fold of folds.csv, from oof.csv alone: whatever the script prints or
writes as its score is never read, so a claimed or hard-coded score cannot pass. A script has every training
label, so it could copy them into oof.csv; the leakage probe (like agent.verify.probes' leak_target) runs it
again with only fold 0's targets changed: fold 0's out-of-fold predictions must not move. When they do, and a
third, unchanged run repeats the first exactly, the script reads the validation fold's target (or ignores
folds.csv): a leak. When the third run differs too, the script is not deterministic and leakage is not checked
(as the probes do for preprocessing); the confinement seeds Python's and NumPy's global generators, so only a
script drawing its own entropy (an unseeded numpy Generator, os.urandom, the clock) gets there. The probe costs
a second run (a third only when predictions moved); a script that fails only in the probe is an error, since
it could not be checked.

Why a fresh interpreter (`subprocess`, not the sandbox's forked workers): a fork would carry the caller's
memory and environment (the API key among them, still readable in /proc/self/environ after os.environ is
cleared) and casebook's modules; a new process starts from an environment built from nothing, and sets its
limits and audit hook before the script's first line. It costs about a second of imports per run, small next
to what an LLM's script does. What the confinement refuses, and what it cannot, is in agent.execution.confine.
The environment: PATH, LANG, HOME and TMPDIR in the run folder, the thread limits, and Python settings
(PYTHONHASHSEED=0 so that set and dict orders repeat between runs); no other variable of the caller's.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from agent.engine import runtime
from agent.engine.dataset import Dataset
from agent.engine.fit import check_folds
from agent.engine.spec import ValidationSpec
from agent.execution import confine
from agent.execution.isolation import Isolation, probe
from agent.execution.sandbox import Limits, Outcome, error_tail, last_line, shows_output

SCRIPT_FILE = "script.py"
TRAIN_FILE = "train.csv"
TEST_FILE = "test.csv"
FOLDS_FILE = "folds.csv"
TASK_FILE = "task.json"
OOF_FILE = "oof.csv"
TEST_PREDICTIONS_FILE = "test_predictions.csv"
ROW = "row"  # the key column of folds.csv and of both prediction files
PREDICTION = "prediction"  # the prediction column when the metric does not score probabilities
FREE_CODE_OFF = "free code is off"  # how an Outcome's error begins when the machine cannot isolate the script
REFUSED_BEFORE_RUNNING = "refused before running"  # in the error of a script the static check refused

# Leak probe results (ScriptRun.leak_probe).
PROBE_OFF = "off"  # not run
PROBE_CLEAN = "clean"  # fold 0's predictions did not move when only its targets changed
PROBE_LEAK = "leak"  # they moved: the script reads the validation fold's target (or ignores folds.csv)
PROBE_NOT_DETERMINISTIC = "not_deterministic"  # the script does not repeat itself, so leakage was not checked

# How much of what a script prints is kept: the end, where results and tracebacks are.
_OUTPUT_CHARS = 4000
_ERROR_CHARS = 8000
_DEFAULT_VALIDATION = ValidationSpec()  # the engine's default folds
_ENVIRONMENT_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                     "LOKY_MAX_CPU_COUNT")

SCRIPT_CONTRACT = f"""\
The script runs in a folder holding {TRAIN_FILE} (features and the target), {TEST_FILE} (features), {FOLDS_FILE} \
(columns {ROW},fold: each training row's validation fold, numbered from 0) and {TASK_FILE} (target, id_column, task_type, metric, \
classes, positive_class, seed, prediction_columns). It must read only these files and write only in this folder; \
it has no network and cannot start programs. It must write {OOF_FILE}: column {ROW} (the 0-based line of \
{TRAIN_FILE}) and the prediction_columns, one line per training row, each predicted by a model fitted only on the \
rows of the other folds of {FOLDS_FILE}; and {TEST_PREDICTIONS_FILE}: column {ROW} (the 0-based line of \
{TEST_FILE}) and the prediction_columns, from a model fitted on every training row. Prediction columns named \
after classes hold that class's probability; a column named {PREDICTION} holds a class label or a value. Fix \
every random seed. Its own score is not used: the engine scores {OOF_FILE} itself."""

_FORBIDDEN_MODULES = {
    **dict.fromkeys(("socket", "_socket", "ssl", "_ssl", "asyncio", "http", "urllib", "urllib3", "requests", "httpx",
                     "aiohttp", "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib", "xmlrpc",
                     "socketserver", "webbrowser", "anthropic", "openai"), "network access is not allowed"),
    **dict.fromkeys(("subprocess", "_posixsubprocess", "pty", "multiprocessing", "pexpect", "posix", "nt"),
                    "starting processes is not allowed"),
    **dict.fromkeys(("ctypes", "_ctypes", "cffi", "numpy.ctypeslib"), "native calls are not allowed"),
    **dict.fromkeys(("importlib", "runpy", "builtins", "code", "codeop", "marshal"), "dynamic code is not allowed"),
}
_OS_MODULES = ("os", "posix", "nt")  # os and the C modules behind it
# os functions by prefix: system, popen, fork and forkpty, kill and killpg, setsid, the exec* and spawn* families.
_FORBIDDEN_OS_CALLS = ("system", "popen", "fork", "kill", "setsid", "exec", "spawn", "posix_spawn")
_FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__", "breakpoint"}
# Attributes that reach code's internals: frames, globals, the builtins, every subclass (how a guard is found and
# disarmed, or a forbidden function reached without naming its module), and the native-call door numpy offers.
_INTROSPECTION = {"__dict__", "__globals__", "__builtins__", "__subclasses__", "__bases__", "__mro__", "__code__",
                  "__closure__", "f_globals", "f_locals", "f_builtins", "f_back", "tb_frame", "gi_frame", "cr_frame",
                  "_getframe", "ctypeslib"}


@dataclass(frozen=True, eq=False)
class ScriptRun:
    """What running and scoring one script found."""

    status: str  # as sandbox.Outcome.status; "error" too for missing or malformed predictions
    fold_values: tuple[float, ...] = ()  # the metric on each fold of folds.csv, in its own units
    error: str = ""  # the traceback's end, or the one line saying what is wrong with the predictions
    output: str = ""  # the end of what the script printed
    elapsed: float = 0.0  # seconds, every run of the script included
    leak_probe: str = PROBE_OFF  # one of the PROBE_ values
    # Every training row's out-of-fold prediction and the test set's, in the engine's form (class codes, or
    # probabilities in class-code order): what the metric scored and what a submission holds.
    oof: Any = field(default=None, repr=False)
    test_prediction: Any = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def metric_value(self) -> float:
        return float(np.mean(self.fold_values)) if self.fold_values else math.nan


class OutputError(ValueError):
    """A prediction file the engine cannot score; the message is one line naming the file and the fix."""


def check_script(source: str) -> list[str]:
    """Problems found in a script without running it, one "line N: ..." string each (empty when none): a syntax
    error, or an import or use of the network, other programs, native code, dynamic code or code's internals,
    under any name it is given (`import os as o`, `getattr(os, "system")`, `sys.modules["os"]`, `vars(b)["eval"]`).
    A first filter with clear reasons, not a boundary: the OS isolation (agent.execution.isolation) is that."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return [f"line {error.lineno}: SyntaxError: {error.msg}"]
    os_names = {"os"} | {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                         for alias in node.names if alias.name in _OS_MODULES}
    problems: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += _import_problems(node.lineno, [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            problems += _import_problems(node.lineno, [module, *(f"{module}.{alias.name}" for alias in node.names)])
            if module in _OS_MODULES:
                problems += [(node.lineno, f"imports {module}.{alias.name}: starting or signalling processes is not "
                                           "allowed") for alias in node.names
                             if alias.name == "*" or _forbidden_os_call(alias.name)]
        elif isinstance(node, ast.Attribute):
            problems += _attribute_problems(node, os_names)
        elif isinstance(node, ast.Call):
            problems += _call_problems(node, os_names)
        elif isinstance(node, ast.Subscript):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if isinstance(key, str) and (key in _FORBIDDEN_BUILTINS or key in _OS_MODULES):
                problems.append((node.lineno, f"looks up {key!r} by name: dynamic code is not allowed"))
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            problems.append((node.lineno, "uses __builtins__: dynamic code is not allowed"))
    return [f"line {line}: {problem}" for line, problem in sorted(set(problems))]


def _import_problems(line: int, modules: list[str]) -> list[tuple[int, str]]:
    """The first forbidden module among `modules` (a module, or a module and the names imported from it)."""
    for module in modules:
        parts = module.split(".")
        reason = _FORBIDDEN_MODULES.get(parts[0]) or _FORBIDDEN_MODULES.get(".".join(parts[:2]))
        if reason:
            return [(line, f"imports {module}: {reason}")]
    return []


def _forbidden_os_call(name: str) -> bool:
    return any(name == call or name.startswith(call) for call in _FORBIDDEN_OS_CALLS)


def _attribute_problems(node: ast.Attribute, os_names: set[str]) -> list[tuple[int, str]]:
    owner = node.value.id if isinstance(node.value, ast.Name) else None
    if owner in os_names and _forbidden_os_call(node.attr):
        return [(node.lineno, f"uses {owner}.{node.attr}: starting or signalling processes is not allowed")]
    if node.attr in _INTROSPECTION:
        return [(node.lineno, f"uses .{node.attr}: reaching code's internals is not allowed")]
    if owner == "sys" and node.attr == "modules":
        return [(node.lineno, "uses sys.modules: reaching modules by name is not allowed")]
    return []


def _call_problems(node: ast.Call, os_names: set[str]) -> list[tuple[int, str]]:
    function = node.func
    if not isinstance(function, ast.Name):
        return []
    if function.id in _FORBIDDEN_BUILTINS:
        return [(node.lineno, f"calls {function.id}(): dynamic code is not allowed")]
    if function.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
        owner, name = node.args[0], node.args[1]
        if not isinstance(name, ast.Constant) or not isinstance(name.value, str):
            return []
        if (isinstance(owner, ast.Name) and owner.id in os_names and _forbidden_os_call(name.value)) \
                or name.value in _FORBIDDEN_BUILTINS or name.value in _INTROSPECTION:
            return [(node.lineno, f"calls {function.id}(..., {name.value!r}): reaching a forbidden function by "
                                  "name is not allowed")]
    return []


def is_refusal(error: str) -> bool:
    """Whether a script's error is a refusal of what it tried: by the static check, the audit hook or the kernel
    (a PermissionError)."""
    return REFUSED_BEFORE_RUNNING in error or last_line(error).startswith("PermissionError")


def write_inputs(dataset: Dataset, run_folder: Path, validation: ValidationSpec = _DEFAULT_VALIDATION,
                 target: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The task's files in `run_folder` (created when missing; earlier predictions removed), and the folds
    (train rows, validation rows) folds.csv describes. `target` replaces the dataset's encoded target in
    train.csv (the leak probe's changed targets); the folds always come from the dataset's own.

    DatasetError when the training rows cannot fill the folds."""
    check_folds(dataset, validation.n_splits)
    folds = runtime.make_folds(dataset.y, classification=dataset.classification, n_splits=validation.n_splits,
                               seed=validation.seed)
    run_folder.mkdir(parents=True, exist_ok=True)
    for name in (OOF_FILE, TEST_PREDICTIONS_FILE):
        (run_folder / name).unlink(missing_ok=True)
    codes = dataset.y if target is None else target
    train = dataset.X.copy()
    train[dataset.target] = dataset.classes[codes] if dataset.classification else codes
    train.to_csv(run_folder / TRAIN_FILE, index=False)
    if dataset.X_test is not None:
        dataset.X_test.to_csv(run_folder / TEST_FILE, index=False)
    fold_of = np.empty(len(dataset.y), dtype=int)
    for index, (_, valid_rows) in enumerate(folds):
        fold_of[valid_rows] = index
    pd.DataFrame({ROW: np.arange(len(fold_of)), "fold": fold_of}).to_csv(run_folder / FOLDS_FILE, index=False)
    (run_folder / TASK_FILE).write_text(json.dumps(_task_description(dataset, validation), indent=2))
    return folds


def _task_description(dataset: Dataset, validation: ValidationSpec) -> dict[str, Any]:
    info = dataset.metric_info
    classes = None if dataset.classes is None else [_plain(label) for label in dataset.classes]
    return {
        "target": dataset.target, "id_column": dataset.id_column, "task_type": dataset.task_type,
        "metric": dataset.metric, "greater_is_better": info.greater_is_better, "needs_proba": info.needs_proba,
        "classes": classes, "positive_class": _plain(dataset.positive_class), "n_splits": validation.n_splits,
        "seed": validation.seed, "key_column": ROW, "prediction_columns": _prediction_columns(dataset),
        "files": {"train": TRAIN_FILE, "test": TEST_FILE if dataset.X_test is not None else None,
                  "folds": FOLDS_FILE, "oof": OOF_FILE,
                  "test_predictions": TEST_PREDICTIONS_FILE if dataset.X_test is not None else None},
    }


def _plain(value: Any) -> Any:
    """A label as JSON holds it: numpy scalars as Python ones, anything else JSON lacks as its string."""
    value = value.item() if isinstance(value, np.generic) else value
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _prediction_columns(dataset: Dataset) -> list[str]:
    if dataset.classification and dataset.metric_info.needs_proba:
        return [str(label) for label in dataset.classes]
    return [PREDICTION]


def execute_script(source: str, run_folder: Path, limits: Limits, isolation: Isolation | None = None, *,
                   allow_unisolated: bool = False) -> Outcome:
    """Run `source` as `script.py` in `run_folder`, isolated (agent.execution.isolation: `isolation`, by default what
    this machine offers) and confined (agent.execution.confine) under `limits`; never raises for anything the script
    does. `Outcome.value` is the end of its stdout; `error` the end of its stderr. Without isolation the script
    does not run (an "error" saying why) unless `allow_unisolated` (agent solve --allow-unisolated-code)."""
    isolation = isolation if isolation is not None else probe()
    if not isolation.available and not allow_unisolated:
        return Outcome("error", error=f"{FREE_CODE_OFF}: this machine offers no OS isolation ({isolation.why_not}); "
                                      "--allow-unisolated-code runs it under the audit hook and limits only")
    run_folder = Path(run_folder).resolve()
    run_folder.mkdir(parents=True, exist_ok=True)
    (run_folder / SCRIPT_FILE).write_text(source)
    memory = "none" if limits.memory_bytes is None else str(limits.memory_bytes)
    # CPU seconds: the wall-clock limit (a script's threads are capped at native_threads), and a second to spare.
    cpu = str(math.ceil(limits.time_seconds) + 1) if math.isfinite(limits.time_seconds) else "none"
    mode = confine.ISOLATED if isolation.available else confine.UNISOLATED
    command = [sys.executable, confine.__file__, memory, cpu, mode, SCRIPT_FILE]
    if isolation.available:
        command = isolation.command(command)
    started = time.monotonic()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        try:
            process = subprocess.Popen(command, cwd=run_folder, env=_environment(run_folder, limits),
                                       stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                       start_new_session=True)
        except OSError as error:
            return Outcome("error", error=f"could not start the script's process ({sys.executable}): {error}")
        try:
            code = process.wait(timeout=max(limits.time_seconds, 0.0))
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _kill_group(process)
        elapsed = time.monotonic() - started
        printed, complaint = _tail(stdout, _OUTPUT_CHARS), _tail(stderr, _ERROR_CHARS)
    if shows_output(limits):
        sys.stdout.write(printed)
        sys.stderr.write(complaint)
    if code is None:
        return Outcome("timeout", value=printed, error=f"timed out after {limits.time_seconds:.0f} s",
                       elapsed=elapsed)
    if code == 0:
        return Outcome("ok", value=printed, elapsed=elapsed)
    if code < 0:
        return Outcome("crashed", value=printed, error=_death(-code, complaint), elapsed=elapsed)
    if code == confine.ISOLATION_EXIT_CODE:
        return Outcome("error", value=printed, error=complaint.strip(), elapsed=elapsed)
    if code == confine.MEMORY_EXIT_CODE:
        limit = "" if limits.memory_bytes is None else f" of {limits.memory_bytes / 1024**3:.1f} GiB"
        return Outcome("memory", value=printed, error=f"over the memory limit{limit}:\n{complaint}", elapsed=elapsed)
    return Outcome("error", value=printed, error=complaint.strip() or f"the script exited with code {code}",
                   elapsed=elapsed)


def _environment(run_folder: Path, limits: Limits) -> dict[str, str]:
    """Built from nothing: none of the caller's variables (keys, tokens, passwords) but the locale and PATH."""
    scratch = run_folder / "tmp"
    scratch.mkdir(exist_ok=True)
    environment = {name: os.environ[name] for name in _ENVIRONMENT_KEPT if name in os.environ}
    environment.update(HOME=str(run_folder), TMPDIR=str(scratch), MPLBACKEND="Agg", PYTHONHASHSEED="0",
                       PYTHONNOUSERSITE="1", PYTHONSAFEPATH="1", PYTHONDONTWRITEBYTECODE="1")
    if not shows_output(limits):
        environment["PYTHONWARNINGS"] = "ignore"
    if limits.native_threads is not None:
        # LOKY_MAX_CPU_COUNT too: joblib sizes n_jobs=-1 by it, and would otherwise ask lscpu (a refused process).
        environment.update(dict.fromkeys(_THREAD_VARIABLES, str(limits.native_threads)))
    return environment


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the script's process group (it and anything it left running) and reap the script. Isolated, the group
    is `unshare` and the script's first process: its death (`--kill-child`) ends the PID namespace, and with it
    every process the script started, whatever group or session it moved to."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _tail(file: IO[bytes], limit: int) -> str:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(size - limit, 0))
    return file.read().decode(errors="replace")


def _death(number: int, complaint: str) -> str:
    if number == signal.SIGXFSZ:
        cause = f"a file it wrote grew past {confine.MAX_FILE_BYTES / 1024**3:.0f} GiB"
    else:
        cause = "out of memory or a native crash"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = str(number)
    return f"the script's process was killed by signal {name} ({cause})\n{error_tail(complaint)}".strip()


def run_script(source: str, dataset: Dataset, run_folder: Path, limits: Limits,
               validation: ValidationSpec = _DEFAULT_VALIDATION, leak_probe: bool = True, *,
               allow_unisolated: bool = False) -> ScriptRun:
    """Check, run and score a script in `run_folder` (see the module's docstring); each run of it is held to
    `limits`. Never raises for anything the script does; DatasetError when the dataset cannot fill the folds."""
    problems = check_script(source)
    if problems:
        return ScriptRun("error", error=f"the script was {REFUSED_BEFORE_RUNNING}: {'; '.join(problems)}")
    run_folder = Path(run_folder)
    folds = write_inputs(dataset, run_folder, validation)
    outcome = execute_script(source, run_folder, limits, allow_unisolated=allow_unisolated)
    if not outcome.ok:
        return ScriptRun(outcome.status, error=outcome.error, output=outcome.value or "", elapsed=outcome.elapsed)
    try:
        oof = read_predictions(run_folder / OOF_FILE, dataset, len(dataset.y))
        test_prediction = None
        if dataset.X_test is not None:
            test_prediction = read_predictions(run_folder / TEST_PREDICTIONS_FILE, dataset, len(dataset.X_test))
        fold_values = tuple(_fold_scores(oof, dataset, folds))
    except OutputError as error:
        return ScriptRun("error", error=str(error), output=outcome.value, elapsed=outcome.elapsed)
    run = ScriptRun("ok", fold_values, output=outcome.value, elapsed=outcome.elapsed, oof=oof,
                    test_prediction=test_prediction)
    if not leak_probe:
        return run
    probe, error, seconds = _probe(source, dataset, validation, oof, folds[0][1], limits, allow_unisolated)
    elapsed = run.elapsed + seconds
    if error:
        return ScriptRun("error", fold_values, error=f"the leakage probe could not check the script: {error}",
                         output=run.output, elapsed=elapsed, oof=oof, test_prediction=test_prediction)
    return ScriptRun("ok", fold_values, output=run.output, elapsed=elapsed, leak_probe=probe, oof=oof,
                     test_prediction=test_prediction)


def _fold_scores(oof: np.ndarray, dataset: Dataset, folds: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    try:
        return runtime.fold_scores(oof, dataset.y, folds, dataset.metric)
    except ValueError as error:
        raise OutputError(f"{OOF_FILE} cannot be scored with {dataset.metric}: {last_line(str(error))}") from error


def read_predictions(path: Path, dataset: Dataset, n_rows: int) -> np.ndarray:
    """A prediction file in the engine's form, ordered by its `row` column; OutputError (one line naming the
    file and the fix) when it is missing, unreadable, lacks a column or a row, or holds a value the metric
    cannot score."""
    name = path.name
    if not path.is_file():
        raise OutputError(f"the script wrote no {name}: write column {ROW!r} and the prediction columns of "
                          f"{TASK_FILE}, one line per row")
    try:
        frame = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, OSError) as error:
        raise OutputError(f"{name} cannot be read as CSV: {last_line(str(error))}") from error
    columns = _prediction_columns(dataset)
    missing = [column for column in (ROW, *columns) if column not in frame.columns]
    if missing:
        raise OutputError(f"{name} lacks column(s) {missing}: it needs {ROW!r} and {columns} (see {TASK_FILE}), "
                          f"has {[str(column) for column in frame.columns][:10]}")
    frame = frame.iloc[_row_order(frame[ROW], name, n_rows)]
    if columns == [PREDICTION] and dataset.classification:
        return _class_codes(frame[PREDICTION], dataset.classes, name)
    values = frame[columns].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values).all(axis=1)
    if bad.any():
        raise OutputError(f"{name}: {int(bad.sum())} line(s) hold a missing, non-numeric or infinite prediction "
                          f"(first: row {int(frame[ROW].iloc[int(np.argmax(bad))])})")
    if columns == [PREDICTION]:
        return values[:, 0]
    if (values < 0).any() or (values.sum(axis=1) <= 0).any():
        raise OutputError(f"{name}: class probabilities must be non-negative, with a positive sum on each line")
    return values / values.sum(axis=1, keepdims=True)


def _row_order(rows: pd.Series, name: str, n_rows: int) -> np.ndarray:
    """The positions that put the file's lines in row order, once each row 0..n_rows-1 is there exactly once."""
    numbers = pd.to_numeric(rows, errors="coerce")
    if numbers.isna().any() or (numbers != numbers.round()).any():
        raise OutputError(f"{name}: column {ROW!r} must hold whole row numbers (0-based lines of the input file)")
    numbers = numbers.astype(int).to_numpy()
    repeated = pd.Series(numbers)[pd.Series(numbers).duplicated()]
    if len(repeated):
        raise OutputError(f"{name} lists row {int(repeated.iloc[0])} more than once")
    outside = numbers[(numbers < 0) | (numbers >= n_rows)]
    if len(outside):
        raise OutputError(f"{name} lists row {int(outside[0])}, but the rows are 0..{n_rows - 1}")
    if len(numbers) != n_rows:
        absent = np.setdiff1d(np.arange(n_rows), numbers)
        raise OutputError(f"{name} has {len(numbers)} of the {n_rows} rows (row {int(absent[0])} is missing)")
    return np.argsort(numbers)


def _class_codes(labels: pd.Series, classes: np.ndarray, name: str) -> np.ndarray:
    """Predicted labels as class codes, matched by their text (and by value, when the classes are numbers)."""
    by_text = {str(label): code for code, label in enumerate(classes)}
    by_value = {}
    if pd.api.types.is_numeric_dtype(pd.Series(classes)):
        by_value = {float(label): code for code, label in enumerate(classes)}
    codes = np.empty(len(labels), dtype=int)
    for position, label in enumerate(labels):
        code = by_text.get(str(label))
        if code is None and by_value:
            number = pd.to_numeric(pd.Series([label]), errors="coerce").iloc[0]
            code = by_value.get(float(number)) if pd.notna(number) else None
        if code is None:
            raise OutputError(f"{name}: {label!r} in column {PREDICTION!r} is not one of the classes "
                              f"{list(by_text)[:10]}")
        codes[position] = code
    return codes


def _probe(source: str, dataset: Dataset, validation: ValidationSpec, reference: np.ndarray,
           valid_rows: np.ndarray, limits: Limits, allow_unisolated: bool) -> tuple[str, str, float]:
    """(PROBE_ result, why the probe could not decide or "", seconds spent): do fold 0's out-of-fold predictions
    move when only fold 0's targets change? Each run is in a throwaway folder."""
    seconds = 0.0

    def rerun(target: np.ndarray | None) -> tuple[np.ndarray | None, str]:
        nonlocal seconds
        folder = Path(tempfile.mkdtemp(prefix="casebook-probe-"))
        try:
            write_inputs(dataset, folder, validation, target)
            outcome = execute_script(source, folder, limits, allow_unisolated=allow_unisolated)
            seconds += outcome.elapsed
            if not outcome.ok:
                return None, f"its run with fold 0's targets changed ended in {outcome.status}: " \
                             f"{last_line(outcome.error)}"
            return read_predictions(folder / OOF_FILE, dataset, len(dataset.y)), ""
        except OutputError as error:
            return None, str(error)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    moved, error = rerun(dataset.changed_target(valid_rows))
    if moved is None:
        return PROBE_OFF, error, seconds
    if _same(moved[valid_rows], reference[valid_rows]):
        return PROBE_CLEAN, "", seconds
    repeat, error = rerun(None)
    if repeat is None:
        return PROBE_OFF, error, seconds
    deterministic = _same(repeat[valid_rows], reference[valid_rows])
    return (PROBE_LEAK if deterministic else PROBE_NOT_DETERMINISTIC), "", seconds


def _same(left: np.ndarray, right: np.ndarray) -> bool:
    return bool(np.allclose(np.asarray(left, dtype=float), np.asarray(right, dtype=float), equal_nan=True))
