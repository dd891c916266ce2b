"""One self-contained HTML report of a simulated iteration (`simulon report SCENARIO -o report.html`): the summary,
the step-time breakdown, the critical path, the findings, the plots and the memory table, from the same result
`simulon simulate --json` prints. The file needs no network: inline CSS, no scripts, the plots (plots/) embedded
as base64 PNG. Every number shown carries the JSON path and exact value it came from (`data-key`, `data-value`)."""

from .page import report_html

__all__ = ["report_html"]
