"""What a learner's feedback page may show.

nbgrader's feedback page shows every test cell as it ran at grading, hidden tests and
their tracebacks included. Ours shows, for a test cell, only its visible part and, when it
failed, the error's type and message: the checks word their messages so that this says what
is wrong (which output, which input, expected against got) without the hidden code.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_END = "### END HIDDEN TESTS"
HIDDEN_NOTE = "# (hidden tests ran here at grading; their code is not shown)"


def visible_part(source: str) -> str:
    """``source`` with every hidden-test region replaced by one comment line."""
    lines, hidden = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line:
            hidden = True
            lines.append(HIDDEN_NOTE)
        elif HIDDEN_END in line:
            hidden = False
        elif not hidden:
            lines.append(line)
    return "\n".join(lines)


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: visible tests only, errors without tracebacks in test cells."""

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.source = visible_part(cell.source)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        return cell, resources


def _mathjax_source() -> Path:
    import mathjax  # the django-static-mathjax package: MathJax 3 as static files

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / "tex-svg-full.js"


_CDN_MATHJAX = re.compile(r'<script src="(https://[^"]*mathjax[^"]*)">\s*</script>', re.IGNORECASE)


def localise_mathjax(feedback_dir: Path) -> None:
    """Make every feedback page under ``feedback_dir`` load MathJax from
    ``feedback_dir/_static`` instead of a CDN, so that no page asks the network for anything.

    A page that leaves the folder on its own (nbgrader's ``release_feedback`` sends the student
    the HTML file alone) finds no copy beside it; only then does it load the CDN's MathJax
    that nbgrader's page named, so that its formulas are still typeset."""
    static = feedback_dir / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy2(_mathjax_source(), static / "tex-svg-full.js")
    config = "<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']]}};</script>\n"
    for page in feedback_dir.rglob("*.html"):
        relative = os.path.relpath(static / "tex-svg-full.js", page.parent)

        def local(cdn: re.Match) -> str:
            fallback = f"delete window.MathJax;var s=document.createElement('script');s.src='{cdn[1]}';document.head.appendChild(s)"
            return f'{config}<script src="{relative}" onerror="{fallback}"></script>'

        html = page.read_text()
        page.write_text(_CDN_MATHJAX.sub(local, html))
