"""`mrcemu study`: its subcommands, registered on the main group by cli.py."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mrcemu.clikit import SLOWDOWN, err, friendly, need_root


class CountsType(click.ParamType):
    """`--hosts 16,32,64`, `--qps 1,4`: the counts a study runs at."""

    name = "N[,N...]"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> list[int]:
        if isinstance(value, list):
            return value
        try:
            out = [int(x) for x in str(value).split(",") if x.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a list of counts such as 16,32,64", param, ctx)
        if not out or min(out) < 1:
            self.fail(f"{value!r}: give one count or more, each at least 1", param, ctx)
        return out


def _check_counts(hosts: list[int], fabrics: dict[int, str], what: str,
                  qps: list[int]) -> None:
    """Bad sizes or QP counts stop a study here, before anything starts."""
    from mrcemu.transport.profiles import MAX_QPS

    for h in hosts:
        if h not in fabrics:
            raise click.BadParameter(f"no {what} fabric of {h} hosts: use "
                                     + ", ".join(map(str, fabrics)), param_hint="--hosts")
    if max(qps) > MAX_QPS:
        raise click.BadParameter(f"a pair has {MAX_QPS} RoCE QPs at most", param_hint="--qps")


# A study of runs: each at auto's pick, rerun slower while not faithful, or as given.
paced_slowdown = click.option(
    "--slowdown", default="auto", show_default=True, type=SLOWDOWN,
    help="Every run's slowdown, or auto: each run's pick, run again slower while it is "
         "not faithful.")


# Imported by cli.py before the load-balancing policies are: nothing of the transport
# here at import, so that a broken policy module is still one clear line there.
@click.group()
def study() -> None:
    """Seeded sets of runs at several fabric sizes: what ECMP's hashing costs, measured."""


@study.command()
@click.option("--hosts", "hosts", type=CountsType(), default="8,16,32,64", show_default=True,
              help="The sizes, in hosts: each has its ECMP fabric (8: ecmp; 16, 32, 64: "
                   "rack4-ecmp, rack4x8-ecmp, rack8x8-ecmp).")
@click.option("--draws", type=click.IntRange(10, 100_000), default=1000, show_default=True,
              help="Draws a size: each a cross-leaf permutation with fresh QP numbers.")
@click.option("--qps", type=CountsType(), default="1,4", show_default=True,
              help="RoCE QPs a pair of hosts (at most 16): a census at each.")
@click.option("--seed", default=1, show_default=True, help="Seed of the draws.")
@click.option("--quick", is_flag=True, help="16 hosts, 100 draws (under a minute here).")
@click.option("--out", "out", default="study", show_default=True,
              type=click.Path(file_okay=False),
              help="Folder for study.json (its `census` section) and census.png.")
def census(hosts: list[int], draws: int, qps: list[int], seed: int, quick: bool, out: str) -> None:
    """Hash census: where the ECMP fabric's kernels hash RoCE QPs, from the switches'
    counters, against the binomial a uniform hash gives."""
    friendly(_census)([16] if quick else hosts, 100 if quick else draws, qps, seed, Path(out))


def _census(hosts: list[int], draws: int, qps: list[int], seed: int, out: Path) -> None:
    from mrcemu.study import census, census_run, plots, results
    from mrcemu.study.census_run import FIELD_QPS
    from mrcemu.study.fabrics import ECMP_FABRICS

    _check_counts(hosts, ECMP_FABRICS, "census", qps)
    results.load(out)  # and so does a results file that is not one
    need_root("study census")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with Progress(TextColumn("{task.description:>14}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("starting", total=None)

        def ui(event: str, d: dict) -> None:
            if event == "stage":
                err.print(d["text"], highlight=False)
            elif event == "up":
                bar.update(task, description=d["stage"], completed=d["n"], total=d["total"])
            elif event == "draw":
                bar.update(task, description=d["topology"], completed=d["n"],
                           total=d["total"])

        try:
            doc = census_run.run(hosts, draws, qps, seed, ui)
        except KeyboardInterrupt:
            bar.stop()
            err.print("mrcemu: study census interrupted: the fabric was torn down; nothing "
                      "written", highlight=False)
            sys.exit(130)
    path = results.write(out, "census", doc)
    plots.census(doc, out / "census.png")
    for s in doc["sizes"]:
        t = census.as_text(s)
        click.echo(f"{s['hosts']:>3} hosts, {s['qps']} QP a pair: {s['draws']} draws, "
                   f"{s['qps_a_leaf']} QPs a leaf over {s['spines']} spines: chi2 {t['chi2']} "
                   f"({t['dof']} dof), p {t['p']}; busiest uplink {t['busiest']} QPs "
                   f"(uniform hash {t['uniform']}); a step, equal shares {t['step']}")
    for hosts_, fields in doc["fields"].items():
        click.echo(f"{hosts_:>3} hosts, what the hash reads: of {FIELD_QPS} QPs, another "
                   + ", ".join(f"{name.replace('_', ' ')} moved {f['moved']}"
                               for name, f in fields.items())
                   + " (a field it reads moves about "
                   + f"{next(iter(fields.values()))['a_hashed_field_moves']:g})")
    click.echo(f"wrote {path} and {out / 'census.png'}")



@study.command()
@click.option("--hosts", "hosts", type=CountsType(), default="8,16,32", show_default=True,
              help="The sizes, in hosts: MRC on default, rack4, rack4x8, rack8x8 (8, 16, 32, "
                   "64), RoCE on their ECMP twins.")
@click.option("--steps", type=click.IntRange(1, 100), default=4, show_default=True,
              help="Steps of each permutation run, each a cross-leaf permutation of its own.")
@click.option("--qps", type=CountsType(), default="1,4", show_default=True,
              help="RoCE QPs a pair (at most 16): a permutation run at each.")
@click.option("--seed", default=1, show_default=True, help="Seed of the permutations.")
@paced_slowdown
@click.option("--quick", is_flag=True, help="16 hosts, 2 steps, 1 QP a pair.")
@click.option("--out", "out", default="study", show_default=True,
              type=click.Path(file_okay=False),
              help="Folder for study.json (its `collisions` section), collisions.png and "
                   "the runs' folders (runs/).")
def collisions(hosts: list[int], steps: int, qps: list[int], seed: int,
               slowdown: float | str, quick: bool, out: str) -> None:
    """Collisions: a synchronous job's steps (cross-leaf permutations, a step waiting for
    its slowest flow) under MRC's spraying and RoCE's hashed QPs, at each size."""
    if quick:
        hosts, steps, qps = [16], 2, [1]
    friendly(_collisions)(hosts, steps, qps, seed, slowdown, Path(out))


def _collisions(hosts: list[int], steps: int, qps: list[int], seed: int,
                slowdown: float | str, out: Path) -> None:
    from mrcemu.study import collisions, collisions_run, plots, results
    from mrcemu.study.fabrics import MRC_FABRICS

    _check_counts(hosts, MRC_FABRICS, "study", qps)
    results.load(out)
    need_root("study collisions")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sizes: list[dict] = []

    def keep(s: dict) -> None:
        sizes.append(s)
        results.write(out, "collisions", {"seed": seed, "steps": steps, "qps": qps,
                                          "slowdown": slowdown, "sizes": sizes})
        plots.collisions(sizes, out / "collisions.png")
        for name, row in s["transports"].items():
            t = collisions.as_text(row)
            click.echo(f"{s['hosts']:>3} hosts, {name}: step efficiency {t['mean']} "
                       f"[{t['p10']}-{t['p90']}] over {row['steps']} steps; alone "
                       f"{t['alone']}, so {t['of_alone']} of it"
                       + ("" if s["faithful"] else " (NOT every run faithful)"))

    def ui(event: str, d: dict) -> None:
        if event == "stage":
            err.print(d["text"], highlight=False)
        elif event == "transport_done":
            sm = d["summary"]
            err.print(f"  {d['transport']}: {sm.get('iterations_done')} iterations, "
                      f"intact {sm.get('integrity_ok')}", highlight=False)

    try:
        collisions_run.run(hosts, steps, qps, seed, slowdown, out / "runs", ui, keep)
    except (KeyboardInterrupt, collisions_run.Interrupted):
        err.print("mrcemu: study collisions interrupted: its fabric was torn down; the sizes "
                  f"done are in {out / results.FILE}", highlight=False)
        sys.exit(130)
    click.echo(f"wrote {out / results.FILE} and {out / 'collisions.png'}")


@study.command()
@click.option("--hosts", "hosts", type=CountsType(), default="8,16", show_default=True,
              help="The sizes, in hosts: MRC on default, rack4, rack4x8, rack8x8 (8, 16, 32, "
                   "64), RoCE with one QP a pair on their ECMP twins.")
@click.option("--trials", type=click.IntRange(1, 200), default=20, show_default=True,
              help="Trials a size and transport, a link down and a gray link in turn: each "
                   "a permutation run three times, the fault inside the second.")
@click.option("--seed", default=1, show_default=True,
              help="Seed of the permutations, the links and the moments.")
@paced_slowdown
@click.option("--quick", is_flag=True, help="8 hosts, 4 trials.")
@click.option("--out", "out", default="study", show_default=True,
              type=click.Path(file_okay=False),
              help="Folder for study.json (its `failures` section), failures.png and the "
                   "runs' folders (runs/).")
def failures(hosts: list[int], trials: int, seed: int, slowdown: float | str, quick: bool,
             out: str) -> None:
    """Failures inside a step: a leaf-spine link down or gray at a random moment of a
    synchronous step, healed when the step ends; the step's extra time over its twin
    without the fault, whether the link carried the step's flows, and whom it idled."""
    if quick:
        hosts, trials = [8], 4
    friendly(_failures)(hosts, trials, seed, slowdown, Path(out))


def _failures(hosts: list[int], trials: int, seed: int, slowdown: float | str,
              out: Path) -> None:
    from mrcemu.study import failures_run, paced_run, plots, results
    from mrcemu.study.fabrics import MRC_FABRICS

    _check_counts(hosts, MRC_FABRICS, "study", [1])
    results.load(out)
    need_root("study failures")
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def keep(sizes: list[dict]) -> None:
        results.write(out, "failures", {"seed": seed, "trials": trials, "slowdown": slowdown,
                                        "sizes": sizes})
        plots.failures(sizes, out / "failures.png")
        s, r = sizes[-1], sizes[-1]["runs"][-1]
        for kind, k in r["summary"].items():
            if not isinstance(k, dict):
                continue
            click.echo(f"{s['hosts']:>3} hosts, {r['transport']}, {kind}: "
                       f"{k['acted']} of {k['trials']} acted, P_hit {k['p_hit']}; "
                       f"extra {k['extra_rtts_median']} base RTTs median, "
                       f"{k['extra_rtts_max']} at most, {k['after_rtts_median']} the step "
                       f"after; amplification {k['amplification_median']}"
                       + ("" if r["faithful"] else " (NOT faithful)"))

    def ui(event: str, d: dict) -> None:
        if event == "stage":
            err.print(d["text"], highlight=False)

    try:
        failures_run.run(hosts, trials, seed, slowdown, out / "runs", ui, keep)
    except (KeyboardInterrupt, paced_run.Interrupted):
        err.print("mrcemu: study failures interrupted: its fabric was torn down; the runs "
                  f"done are in {out / results.FILE}", highlight=False)
        sys.exit(130)
    click.echo(f"wrote {out / results.FILE} and {out / 'failures.png'}")


@study.command()
@click.option("--draws", type=click.IntRange(10, 100_000), default=300, show_default=True,
              help="The model's draws a size and transport (permutations and hashes).")
@click.option("--seed", default=1, show_default=True, help="Seed of the model's draws.")
@click.option("--out", "out", default="study", show_default=True,
              type=click.Path(file_okay=False),
              help="The study's folder: reads its `collisions`, writes its `model`.")
def model(draws: int, seed: int, out: str) -> None:
    """The collision model against the emulated steps: for each size and transport the
    study measured, what the model gives for the same fabric, QPs and lone-flow
    efficiency; and, where the study measured failures, the model's chance that a failed
    link touches a step against the trials' (no root, no fabric)."""
    friendly(_model)(draws, seed, Path(out))


def _model(draws: int, seed: int, out: Path) -> None:
    from mrcemu.study import against_model, results

    doc = results.load(out)
    if "collisions" not in doc:
        raise results.MissingSection(f"{out / results.FILE} has no collisions: run `mrcemu study "
                          f"collisions --out {out}` first")
    rows = against_model.compare(doc["collisions"], draws, seed)
    hits = (against_model.compare_failures(doc["failures"], draws, seed)
            if "failures" in doc else [])
    results.write(out, "model", {"draws": draws, "seed": seed,
                                 "within": against_model.WITHIN, "rows": rows,
                                 "failures": hits})
    for r in rows:
        click.echo(f"{r['hosts']:>3} hosts, {r['transport']}: model {r['model_mean']:.2f} "
                   f"[{r['model_p10']:.2f}-{r['model_p90']:.2f}], measured "
                   f"{r['measured_mean']:.2f} ({r['off']:+.0%}): "
                   + ("agrees" if r["agrees"] else "does not agree"))
    for r in hits:
        click.echo(f"{r['hosts']:>3} hosts, {r['transport']}: a failed link touched the step "
                   f"in {r['crossed']} of {r['acted']} trials; the model's P_hit "
                   f"{r['model_p_hit']:.2f} holds {r['band'][0]}-{r['band'][1]} of them: "
                   + ("agrees" if r["agrees"] else "does not agree"))
    click.echo(f"wrote {out / results.FILE}")
