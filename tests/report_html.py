"""What a built report.html holds, read back for tests: its example rows and the stories
its script draws into them (:func:`faultline.report.page.stories_payload`)."""

from __future__ import annotations

import base64
import gzip
import re
from typing import Any

import orjson


def stories(page: str) -> dict[str, list[list[Any]]]:
    """The page's embedded stories: per anomaly type, ``[lines, explanation]`` per row."""
    found = re.search(r'<script type="application/octet-stream" id="stories"[^>]*>([^<]*)</script>', page)
    assert found is not None, "the page embeds no stories"
    loaded: dict[str, list[list[Any]]] = orjson.loads(gzip.decompress(base64.b64decode(found.group(1))))
    return loaded


def story_text(page: str) -> str:
    """Every embedded story line and explanation, one per line."""
    return "\n".join(line for rows in stories(page).values() for lines, explanation in rows
                     for line in [*lines, explanation])


def example_values(page: str, anomaly: str) -> list[str]:
    """The ``data-value`` of each example row of ``anomaly``, in the page's order."""
    row = rf'<tr class="example[^"]*" data-anomaly="{re.escape(anomaly)}" data-value="([^"]*)"'
    return re.findall(row, page)
