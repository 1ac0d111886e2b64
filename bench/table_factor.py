"""How much other model families' times on a table tell of a family's own (issue 25, item 3: drafts sized up front).

The search corrects the fit-time model's estimate of a draft by what this table's drafts took against it
(agent.search.fit_time.DraftTimes.table_factor). Its family's own finished drafts say it best; before any has
finished, the other families' are all there is: often only the linear reference draft's. Here, on the experience
pack's tables (data/experience/pack.json: every configuration's CV seconds and rows, 224 experience-pool tables, no
evaluation table), each family's log ratio of measured to expected seconds (the median over its configurations
without a seed bag) is set against the mean of the other families' on the same table. Per family, the power their
ratio is raised to (`FamilyTime.transfer`) is the least-squares slope through the origin, kept within 0 and 1; the
table shows the error of the three rules: no transfer (a factor of 1), the whole ratio (the rule before), the slope.

    python -m bench.table_factor [--write]

With --write, each family's transfer in data/fit_times.json and the section "## What other families' times tell of a
draft's (issue 25)" of bench/RESULTS.md are rewritten.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import replace
from datetime import date

import click

from agent.memory.experience import bundled_pack_path, read_pack
from agent.search.fit_time import FIT_TIMES_FILE, FitTimeModel
from bench.results import write_section
from bench.throughput_bench import REPO, code_stamp

SECTION = "## What other families' times tell of a draft's (issue 25)"


def log_ratios(model: FitTimeModel) -> list[dict[str, float]]:
    """Per pack table, each known family's median log(measured / expected) over its configurations without a bag."""
    tables = []
    for task in read_pack(bundled_pack_path()).tasks:
        kinds = dict(task.signature.column_kinds)
        columns = sum(count for kind, count in kinds.items() if kind != "id")
        text = kinds.get("text", 0) > 0
        found = defaultdict(list)
        for config in task.configs:
            name, params = config.spec["model"]["name"], config.spec["model"]["params"]
            if model.knows(name) and config.seconds and params.get("seed_bag", 1) == 1:
                found[name].append(math.log(config.seconds / model.seconds(name, config.rows, columns, text)))
        tables.append({name: statistics.median(values) for name, values in found.items()})
    return tables


def fitted(tables: list[dict[str, float]], family: str) -> dict[str, float]:
    pairs = [(statistics.mean(value for name, value in table.items() if name != family), table[family])
             for table in tables if family in table and len(table) > 1]
    slope = sum(x * y for x, y in pairs) / sum(x * x for x, _ in pairs)
    transfer = min(max(slope, 0.0), 1.0)

    def error(power: float) -> float:
        return math.sqrt(statistics.mean((y - power * x) ** 2 for x, y in pairs))

    return {"tables": len(pairs), "slope": slope, "transfer": transfer, "none": error(0.0), "whole": error(1.0),
            "fitted": error(transfer)}


@click.command()
@click.option("--write", is_flag=True, help="Rewrite data/fit_times.json's transfers and the RESULTS.md section.")
def main(write: bool) -> None:
    model = FitTimeModel.bundled()
    tables = log_ratios(model)
    results = {family: fitted(tables, family) for family in sorted(model.families)}
    rows = [f"| {family} | {r['tables']} | {r['slope']:.2f} | {r['transfer']:.2f} | {r['none']:.3f} | "
            f"{r['whole']:.3f} | {r['fitted']:.3f} |" for family, r in results.items()]
    section = "\n".join([
        SECTION, "",
        f"`python -m bench.table_factor` ({date.today()}; casebook {code_stamp(None)}). On the experience pack's "
        f"{len(tables)} tables, each family's log ratio of measured to expected seconds against the mean of the other "
        "families' on the same table. Error: the root mean square of the log error of the family's correction under "
        "each rule (0.5 is a factor of 1.6): none = a factor of 1, whole = the other families' ratio (the rule "
        "before), fitted = their ratio raised to the transfer (the slope, within 0 and 1).", "",
        "| family | tables | slope | transfer | error, none | error, whole | error, fitted |",
        "|---|---:|---:|---:|---:|---:|---:|", *rows])
    click.echo(section)
    if write:
        families = {name: replace(family, transfer=round(results[name]["transfer"], 2))
                    for name, family in model.families.items()}
        (REPO / "data" / FIT_TIMES_FILE).write_text(
            json.dumps(replace(model, families=families).to_dict(), indent=1) + "\n", encoding="utf-8")
        write_section(REPO / "bench" / "RESULTS.md", section)


if __name__ == "__main__":
    main()
