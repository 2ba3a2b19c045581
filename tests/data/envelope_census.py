"""What one torch version's logs hold that another's do not, scenario by scenario (docs/torch_versions.md).

    python tests/data/envelope_census.py 2.14.1 2.15.0

For each scenario both versions ran, it counts envelope kinds, artifact names, chromium events (phase, name),
fail types and the compile ids that have records but no dynamo_start, and prints what is in one version only.
Version 2.13.0 is the sample set (tests/data/<scenario>/) with versions/2.13.0/. Reads the logs itself, without
tlindex, so it can check what tlindex makes of them.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENVELOPE = re.compile(rb"^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]+\] (\{.*\})$")
RESUME = re.compile(r"torch_dynamo_resume_in_\w+?_at_\d+")


def folders(version: str) -> dict[str, Path]:
    found = {path.name: path for path in (HERE / "versions" / version).glob("*/") if path.is_dir()}
    if version == "2.13.0":
        found.update({path.name: path for path in HERE.glob("*/") if path.is_dir() and path.name != "versions"})
    return found


def records(log: Path):
    """(envelope, payload) of each record of a log."""
    envelope, payload = None, []
    for line in open(log, "rb"):
        if line.startswith(b"\t"):
            payload.append(line[1:].rstrip(b"\n"))
            continue
        if envelope is not None:
            yield envelope, b"\n".join(payload)
        match = ENVELOPE.match(line.rstrip(b"\n"))
        envelope, payload = (json.loads(match.group(1)) if match else None), []
    if envelope is not None:
        yield envelope, b"\n".join(payload)


def census(folder: Path) -> Counter:
    counts: Counter = Counter()
    started, ids = set(), set()
    for log in sorted(folder.iterdir()):
        for envelope, payload in records(log):
            kind = next(iter(envelope))
            counts["kind", kind] += 1
            if kind == "artifact":
                counts["artifact", RESUME.sub("torch_dynamo_resume_in_*", envelope[kind]["name"])] += 1
            elif kind == "chromium_event" and payload:
                event = json.loads(payload)
                counts["chromium", event.get("ph"), event.get("name")] += 1
            elif kind.endswith("compilation_metrics") and envelope[kind].get("fail_type"):
                counts["fail_type", envelope[kind]["fail_type"]] += 1
            if "frame_id" in envelope and "compiled_autograd_id" not in envelope:
                key = (log.name, envelope["frame_id"], envelope["frame_compile_id"])
                ids.add(key)
                if kind == "dynamo_start":
                    started.add(key)
    for _, frame, compile in ids - started:
        counts["no dynamo_start", f"{frame}/{compile}"] += 1
    return counts


def main() -> None:
    old, new = sys.argv[1:3]
    before, after = folders(old), folders(new)
    for scenario in sorted(set(before) & set(after)):
        a, b = census(before[scenario]), census(after[scenario])
        gone, came = sorted(set(a) - set(b), key=str), sorted(set(b) - set(a), key=str)
        if gone or came:
            print(f"== {scenario}")
            print("".join(f"   - {key} x{a[key]}\n" for key in gone) + "".join(f"   + {key} x{b[key]}\n" for key in came),
                  end="")


if __name__ == "__main__":
    main()
