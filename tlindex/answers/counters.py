"""Names and numbers torch takes from process-wide counters, masked so that two runs compare by content.

An unchanged function compiled after one more compile elsewhere gets other numbers: its AOT id
(`# AOT ID: ['2_inference']` becomes `['3_inference']`), its `__compiled_fn_N`, the
`__resume_at_N_M` and `tmp_N` of Dynamo's bytecode, the uuid suffix of a compiled function. None of
these says anything about the graph or the code, so `tlindex diff` masks them before comparing.
"""

from __future__ import annotations

import hashlib
import re

COUNTERS = [
    (re.compile(r"(AOT ID: \[')\d+(_\w+'\])"), r"\1N\2"),
    (re.compile(r"\b__compiled_fn_\d+(?:_[0-9a-f]{8}(?:_[0-9a-f]{4}){3}_[0-9a-f]{12})?"), "__compiled_fn_N"),
    (re.compile(r"\b__resume_at_\d+_\d+\b"), "__resume_at_N"),
    (re.compile(r"\btmp_\d+\b"), "tmp_N"),
]


def mask_counters(text: str) -> str:
    """The text with every counter-derived name and number replaced by a placeholder."""
    for pattern, replacement in COUNTERS:
        text = pattern.sub(replacement, text)
    return text


def content_key(text: str) -> str:
    """A digest of the text with its counters masked: equal for two runs' same graph or code."""
    return hashlib.md5(mask_counters(text).encode("utf-8", "surrogatepass")).hexdigest()
