"""A page as headless chromium lays it out at a given width: how wide the document is, which elements scroll or clip
sideways, where the solution tree's boxes landed and which plot texts stick out of their plot. The pages carry no
script, so a copy with one measuring script appended is opened; the script writes its findings into the DOM, and
--dump-dom prints them (no DevTools protocol needed)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

# Every <details> is opened first, so folded content (the journal's code, the settings) is measured too.
MEASURE = """<script>
for (const details of document.querySelectorAll("details")) details.open = true;
const box = (element) => { const r = element.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
const name = (element) => element.tagName.toLowerCase() + (element.id ? "#" + element.id : "");
const stickingOut = [];
for (const svg of document.querySelectorAll(".plot svg")) {
  const frame = svg.getBoundingClientRect();
  for (const text of svg.querySelectorAll("text")) {
    const r = text.getBoundingClientRect();
    if (r.width && (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1
                    || r.bottom > frame.bottom + 1)) stickingOut.push(text.textContent);
  }
}
document.body.setAttribute("data-measured", JSON.stringify({
  scrollWidth: document.documentElement.scrollWidth,
  sideways: [...document.querySelectorAll("body *")]
    .filter((element) => element.scrollWidth > element.clientWidth + 1
                         && getComputedStyle(element).overflowX !== "visible").map(name),
  treeBoxes: [...document.querySelectorAll("#solution-tree svg rect")].map(box),
  textsOutsidePlots: stickingOut,
}));
</script>"""


def need_chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium); the browser checks need it")
    return path


def measure(page: Path, width: int = 1280) -> dict[str, Any]:
    """Open `page` in headless chromium `width` pixels wide (no scrollbar taking part of it) and measure it."""
    chromium = need_chromium()
    copy = page.with_name(f"measured-{page.name}")  # beside the page, so its relative links resolve the same
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", f"{MEASURE}</body>"), encoding="utf-8")
    completed = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                f"--window-size={width},900", "--dump-dom", copy.resolve().as_uri()],
                               capture_output=True, text=True, timeout=120, check=True)
    copy.unlink()
    found = re.search(r'data-measured="([^"]*)"', completed.stdout)
    assert found, f"the measuring script did not run: {completed.stderr[-500:]}"
    return json.loads(html.unescape(found.group(1)))


def overlapping(boxes: list[list[float]], tolerance: float = 0.5) -> list[tuple[int, int]]:
    """Pairs of (left, top, width, height) boxes that overlap by more than `tolerance` pixels both ways."""
    return [(i, j) for i, (x1, y1, w1, h1) in enumerate(boxes) for j, (x2, y2, w2, h2) in enumerate(boxes[:i])
            if min(x1 + w1, x2 + w2) - max(x1, x2) > tolerance and min(y1 + h1, y2 + h2) - max(y1, y2) > tolerance]
