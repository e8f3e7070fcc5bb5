"""Markdown for docs/benchmarks-method.md from the benchmarks' saved JSON, and the generated sections.

A generated section is everything between ``<!-- generated: NAME -->`` and the next
``<!-- end generated -->``; ``replace_sections`` rewrites only that, so the hand-written prose
around it stays as it is. ``render_section`` turns the records of one section's runs (what
``run_all.py`` saves in ``benchmarks/results/``: the script's ``--json`` report wrapped with the
command, the date, the machine and the load) into its Markdown: the machine and software, one
line per run, the measurements, and the ratios against the references measured in the same run.
"""

from __future__ import annotations

import re

BEGIN = re.compile(r"<!-- generated: ([A-Za-z0-9_-]+) -->")
END = "<!-- end generated -->"
_TOKEN = re.compile(BEGIN.pattern + "|" + re.escape(END))


class MarkerError(ValueError):
    """The generated-section markers of a Markdown file are missing, unbalanced or repeated."""


def find_sections(text: str) -> dict[str, tuple[int, int]]:
    """``{name: (start, end)}``: the span of each generated section's content, between its markers."""
    sections: dict[str, tuple[int, int]] = {}
    open_name, open_at, open_line = None, 0, 0
    for match in _TOKEN.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        name = match.group(1)
        if name is not None:  # a begin marker
            if open_name is not None:
                raise MarkerError(
                    f"line {line}: section {name!r} begins before section {open_name!r} "
                    f"(line {open_line}) has its {END}"
                )
            if name in sections:
                raise MarkerError(f"line {line}: a second section named {name!r}")
            open_name, open_at, open_line = name, match.end(), line
        else:
            if open_name is None:
                raise MarkerError(f"line {line}: {END} without a <!-- generated: NAME --> before it")
            sections[open_name] = (open_at, match.start())
            open_name = None
    if open_name is not None:
        raise MarkerError(f"line {open_line}: section {open_name!r} has no {END}")
    return sections


def replace_sections(text: str, contents: dict[str, str]) -> str:
    """``text`` with the content of each named section replaced; every other byte kept."""
    spans = find_sections(text)
    missing = sorted(set(contents) - set(spans))
    if missing:
        raise MarkerError(
            "no generated section for "
            + ", ".join(f"{name!r} (add <!-- generated: {name} --> ... {END})" for name in missing)
        )
    for name in sorted(contents, key=lambda n: spans[n][0], reverse=True):  # from the end: spans stay valid
        start, end = spans[name]
        text = text[:start] + "\n" + contents[name].strip("\n") + "\n" + text[end:]
    return text


# -- one section's Markdown --


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_value(value, unit: str) -> str:
    """A measurement as the scripts print it: whole rows, one decimal for seconds and sizes."""
    if value is None:
        return "–"
    digits = 0 if unit in ("rows/s", "rows") else 1
    return f"{value:,.{digits}f} {unit}"


def format_ratio(value) -> str:
    """A ratio, bold (the figure the table is about)."""
    return "–" if value is None else f"**{value:.2f}**"


def describe_machine(machine: dict) -> str:
    """One line: CPU, cores, memory, OS and GPUs."""
    cores = f"{machine.get('logical_cores')} cores"
    if machine.get("physical_cores") not in (None, machine.get("logical_cores")):
        cores += f" ({machine['physical_cores']} physical)"
    gpus = machine.get("stack", {}).get("gpus", "GPUs unknown").split(";")[0]
    return f"{machine.get('cpu')}, {cores}, {machine.get('memory_gib')} GiB of memory, {machine.get('os')}; {gpus}"


def describe_stack(machine: dict) -> str:
    """One line: the versions that matter to the figures, and the commit measured."""
    stack = machine.get("stack", {})
    java = stack.get("java", "unknown")
    match = re.search(r'(\S+) version "([^"]+)"', java)
    parts = [
        f"Python {stack.get('python')}",
        f"PySpark {stack.get('pyspark')}",
        stack.get("tensorflow", "TensorFlow ?"),
        f"tf-keras {stack.get('tf-keras')}",
        f"Keras {stack.get('keras')}",
        f"Java {match.group(2)} ({match.group(1)})" if match else f"Java: {java}",
        f"TensorFlowOnSpark {stack.get('tensorflowonspark')}",
        f"sparkdl {stack.get('sparkdl')}",
    ]
    commit = machine.get("commit")
    return "; ".join(parts) + (f", commit `{commit}`" if commit else "")


def _settings(config: dict) -> str:
    shown = {k: v for k, v in config.items() if k != "json" and v not in (None, "", [], {})}
    return ", ".join(f"{k} {v}" for k, v in shown.items())


def _generic_tables(records: list[dict], labelled: bool) -> list[str]:
    """A measurements table and a ratios table, with a run column when the section has several runs."""
    head = "| run " if labelled else ""
    sep = "|---" if labelled else ""
    lines = [f"{head}| measurement | value |", f"{sep}|---|---:|"]
    for record in records:
        run = f"| {_cell(record['label'])} " if labelled else ""
        for name, entry in record["report"].get("measurements", {}).items():
            lines.append(f"{run}| {_cell(name)} | {format_value(entry.get('value'), entry.get('unit', ''))} |")
    ratio_rows = []
    for record in records:
        run = f"| {_cell(record['label'])} " if labelled else ""
        ratio_rows += [
            f"{run}| {_cell(name)} | {format_ratio(value)} |"
            for name, value in record["report"].get("ratios", {}).items()
        ]
    if ratio_rows:
        lines += ["", f"{head}| ratio | value |", f"{sep}|---|---:|", *ratio_rows]
    else:
        lines += ["", "No ratios: the references did not run (see the notes)."]
    return lines


def _inference_tables(records: list[dict], labelled: bool) -> list[str]:
    """inference_udf.py's own layout: one row per model and variant, its ratios as columns."""
    if not all(record["report"].get("raw", {}).get("results") for record in records):
        return _generic_tables(records, labelled)
    head = "| run " if labelled else ""
    sep = "|---" if labelled else ""
    lines = [
        f"{head}| model | variant | rows/s | × PySpark `predict_batch_udf` | × single process | runs (s) |",
        f"{sep}|---|---|---:|---:|---:|---|",
    ]
    for record in records:
        run = f"| {_cell(record['label'])} " if labelled else ""
        for row in record["report"]["raw"]["results"]:
            lines.append(
                f"{run}| {row['model']} | {_cell(row['variant'])} | {row['rows_per_s']:,.0f} | "
                f"{format_ratio(row.get('vs_pyspark'))} | {format_ratio(row.get('vs_single'))} | "
                f"{row.get('runs', '')} |"
            )
    return lines


def _limits_value(value, unit: str) -> str:
    """A limits.py figure: a ratio bold, seconds with two decimals (epochs take tenths of one)."""
    if unit == "ratio":
        return format_ratio(value)
    return "–" if value is None else f"{value:,.2f} s" if unit == "s" else format_value(value, unit)


def _limits_tables(records: list[dict], labelled: bool) -> list[str]:
    """limits.py's own layout: one row per figure, before and after side by side, and the target."""
    if not all(record["report"].get("raw", {}).get("figures") for record in records):
        return _generic_tables(records, labelled)
    head = "| run " if labelled else ""
    sep = "|---" if labelled else ""
    lines = []
    for record in records:
        config = record["report"].get("config", {})
        before, after = config.get("before_commit") or "?", config.get("after_commit") or "?"
        lines += [
            f"{head}| figure | before (`{before}`) | after (`{after}`) | target |",
            f"{sep}|---|---:|---:|---|",
        ]
        run = f"| {_cell(record['label'])} " if labelled else ""
        for row in record["report"]["raw"]["figures"]:
            lines.append(
                f"{run}| {_cell(row['figure'])} | {_limits_value(row.get('before'), row['unit'])} | "
                f"{_limits_value(row.get('after'), row['unit'])} | {_cell(row.get('target') or '')} |"
            )
    return lines


#: Scripts whose results read better in their own layout than as measurement and ratio lists.
TABLES = {"inference_udf.py": _inference_tables, "limits.py": _limits_tables}


def render_section(records: list[dict], source: str) -> str:
    """The Markdown of one generated section from its runs' records (in the order they ran)."""
    labelled = len(records) > 1
    machines = {describe_machine(r["machine"]) + " | " + describe_stack(r["machine"]) for r in records}
    lines = [
        f"<!-- Written by benchmarks/run_all.py from {source}: change the scripts or run_all.py, not this block. -->"
    ]
    if any(record.get("quick") for record in records):
        lines += ["", "**Quick smoke run (`--quick`): sizes far too small for these figures to mean anything.**"]
    if len(machines) == 1:
        machine = records[0]["machine"]
        lines += ["", f"Machine: {describe_machine(machine)}.", f"Software: {describe_stack(machine)}."]
    lines += ["", "Runs, one after another:", ""]
    for record in records:
        where = (
            ""
            if len(machines) == 1
            else (f"; on {describe_machine(record['machine'])}; {describe_stack(record['machine'])}")
        )
        label = f"{record['label']}: " if labelled else ""
        lines.append(
            f"- {label}`{record['command']}`, started {record['started']}, took "
            f"{record['duration_s'] / 60:.1f} min, load average {record['load_before']} at its start{where}; "
            f"settings: {_settings(record['report'].get('config', {}))}."
        )
    lines.append("")
    lines += TABLES.get(records[0]["script"], _generic_tables)(records, labelled)
    notes = [(record["label"], note) for record in records for note in record["report"].get("notes", [])]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {f'{label}: ' if labelled else ''}{note}" for label, note in notes]
    return "\n".join(lines)
