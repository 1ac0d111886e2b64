"""A non-editable install works away from the source tree: the wheel carries data/ as the package casebook_data.

The wheel is built from a copy of the sources (so no build/ or egg-info lands in the working tree), installed
with `pip install --target`, and used from an unrelated folder by a fresh interpreter whose PYTHONPATH puts the
installed copy first (third-party packages still come from this venv).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

REPO = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
DATA_PACKAGE = "casebook_data"
DATA_FOLDER = REPO / SETUPTOOLS["package-dir"][DATA_PACKAGE]
# What the code reads at run time, relative to data/.
RUNTIME_FILES = ["taxonomy.json", "competitions.json", "recipes.json", "eval/queries.jsonl"]
BUNDLED_CARDS = sorted(p.relative_to(DATA_FOLDER).as_posix() for p in (DATA_FOLDER / "knowledge").glob("*.jsonl"))


def _code_packages_in_tree() -> set[str]:
    tops = {name.split(".")[0] for name in SETUPTOOLS["packages"] if not name.startswith(DATA_PACKAGE)}
    found = find_namespace_packages(str(REPO), include=[f"{top}" for top in tops] + [f"{top}.*" for top in tops])
    return {name for name in found if not name.endswith("__pycache__")}


def test_pyproject_lists_every_package_and_data_folder():
    """pyproject.toml lists packages by hand (casebook_data's folder is named data/): none may be forgotten."""
    listed = set(SETUPTOOLS["packages"])
    missing = _code_packages_in_tree() - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    data_folders = {DATA_PACKAGE + "".join(f".{part}" for part in folder.relative_to(DATA_FOLDER).parts)
                    for folder in [DATA_FOLDER, *DATA_FOLDER.rglob("*")]
                    if folder.is_dir() and folder.name != "__pycache__" and any(f.is_file() for f in folder.iterdir())}
    missing = data_folders - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages (and package-data) in pyproject.toml"
    assert len(BUNDLED_CARDS) >= 1


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the --target folder it is installed in)."""
    root = tmp_path_factory.mktemp("packaging")
    source = root / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for top in {name.split(".")[0] for name in SETUPTOOLS["packages"]} | {DATA_PACKAGE}:
        folder = SETUPTOOLS["package-dir"].get(top, top)
        shutil.copytree(REPO / folder, source / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(root / "dist"),
                    str(source)], check=True, capture_output=True, text=True, cwd=root)
    (wheel,) = (root / "dist").glob("casebook-*.whl")
    site = root / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, text=True, cwd=root)
    return wheel, site


def _run_installed(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CASEBOOK_HOME", None)
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def test_wheel_carries_the_data_files(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for relative in [*RUNTIME_FILES, *BUNDLED_CARDS]:
        assert f"{DATA_PACKAGE}/{relative}" in names
        assert zipfile.ZipFile(wheel).read(f"{DATA_PACKAGE}/{relative}") == (DATA_FOLDER / relative).read_bytes()
    in_tree = {path.relative_to(REPO).as_posix() for package in _code_packages_in_tree()
               for path in (REPO / package.replace(".", "/")).iterdir()
               if path.is_file() and path.suffix != ".pyc"}
    missing = sorted(in_tree - names)
    assert not missing, f"not in the wheel (list them in [tool.setuptools.package-data]): {missing}"


def test_installed_copy_loads_its_data_from_an_unrelated_folder(installed, tmp_path):
    _, site = installed
    script = """
import json
import kb
from agent.knowledge.recipes import RECIPES_PATH, catalogue
from kb.competitions import known_competitions
from kb.config import bundled_knowledge
from kb.taxonomy import load_taxonomy
from retrieval.evaluation import DEFAULT_QUERIES, EvalQuery
print(json.dumps({"kb": kb.__file__, "labels": len(load_taxonomy().labels), "competitions": len(known_competitions()),
                  "recipes": len(catalogue()), "queries": len(EvalQuery.load_all()),
                  "paths": [str(p) for p in (RECIPES_PATH, DEFAULT_QUERIES, bundled_knowledge())]}))
"""
    loaded = json.loads(_run_installed(site, tmp_path, "-c", script).stdout)
    assert Path(loaded["kb"]).is_relative_to(site)
    assert all(Path(path).is_relative_to(site / DATA_PACKAGE) for path in loaded["paths"])
    assert loaded["labels"] > 10 and loaded["competitions"] > 0 and loaded["recipes"] >= 30 and loaded["queries"] > 0


@pytest.mark.slow
def test_installed_kb_ingests_the_bundled_cards_from_an_unrelated_folder(installed, tmp_path):
    _, site = installed
    cards = sum(1 for relative in BUNDLED_CARDS
                for line in (DATA_FOLDER / relative).read_text(encoding="utf-8").splitlines() if line.strip())
    work = tmp_path / "elsewhere"
    work.mkdir()
    done = _run_installed(site, work, "-c", "from cli.kb import main; main(prog_name='kb')",
                          "--home", str(tmp_path / "home"), "ingest", "--bundled", "--quiet", "--json")
    summary = json.loads(done.stdout)
    assert summary["failed"] == 0 and summary["files"] == len(BUNDLED_CARDS)
    assert summary["tricks"] == cards  # 209 when this was written
    assert not (work / ".casebook").exists()


def test_ingest_needs_paths_or_bundled(tmp_path):
    from click.testing import CliRunner

    from cli.kb import main

    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "ingest"])
    assert result.exit_code == 2 and "--bundled" in result.output
    assert not (tmp_path / "home").exists()
