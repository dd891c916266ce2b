"""HTML pieces of the report: escaped text, numbers that name the JSON value they show, tables, sections and
embedded images. Everything is built from strings in a fixed order, so the same result gives the same bytes."""

from __future__ import annotations

import base64
import json
from html import escape
from typing import Any

from ..analysis.shown import shown_number
from ..config.units import GiB

FORMATS = {"s": ("{:,.2f}", 1.0, " s"), "ms": ("{:,.2f}", 1.0, " ms"), "%": ("{:.1f}", 100.0, "%"),
           "GiB": ("{:,.2f}", 1.0 / GiB, " GiB"), "tokens/s": ("{:,.0f}", 1.0, " tokens/s"),
           "TFLOP/s": ("{:.1f}", 1.0, " TFLOP/s"), "": ("{:,}", 1.0, "")}
"""Per unit: the format of the shown number, the factor from the JSON value to it, and the unit written after it."""


def number(key: str, value: float, unit: str = "ms", suffixed: bool = True) -> str:
    """A number as shown (formatted in `unit`, followed by the unit unless the column names it), tagged with its
    JSON path and its exact JSON value."""
    fmt, factor, suffix = FORMATS[unit]
    suffix = suffix if suffixed or unit == "%" else ""
    return (f'<span class="num" data-key="{escape(key)}" data-unit="{escape(unit)}" '
            f'data-value="{escape(json.dumps(value))}">{shown_number(value if factor == 1 else value * factor, fmt)}'
            f"{escape(suffix)}</span>")


def text(value: Any) -> str:
    return escape(str(value))


def table(headers: tuple[str, ...], rows: list[tuple[str, ...]], caption: str = "") -> str:
    """A table of already-escaped cells; numeric columns (every column but the first) right-aligned."""
    head = "".join(f"<th>{text(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>\n" for row in rows)
    cap = f"<caption>{text(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table></div>\n'


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{escape(anchor)}">\n<h2>{text(title)}</h2>\n{body}</section>\n'


def image(png: bytes, alt: str) -> str:
    """A PNG embedded as a data URI (the file needs nothing beside it)."""
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img class="plot" alt="{escape(alt)}" src="data:image/png;base64,{data}"></figure>\n'


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: #222;
       background: #fafafa; margin: 0; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 1rem 1.5rem 3rem; background: #fff; }
h1 { font-size: 1.6rem; margin: 0.5rem 0; } h2 { font-size: 1.25rem; border-bottom: 1px solid #ddd;
     padding-bottom: 0.2rem; margin-top: 2rem; } h3 { font-size: 1.05rem; margin: 1.2rem 0 0.4rem; }
nav a { margin-right: 1rem; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8rem; } .card { border: 1px solid #ddd; border-radius: 6px;
        padding: 0.5rem 0.9rem; min-width: 9rem; } .card .label { font-size: 0.8rem; color: #666; }
.card .num, .card .verdict { font-size: 1.3rem; font-weight: 600; }
.fits { color: #2a7a2a; } .no-fit { color: #b02a2a; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid #ddd; padding: 0.2rem 0.45rem; } td { white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; } th { background: #f0f0f0; text-align: left; }
td + td { text-align: right; } tbody tr:nth-child(even) { background: #f8f8f8; }
caption { text-align: left; font-weight: 600; padding: 0.3rem 0; }
.tables { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
figure { margin: 0.5rem 0 1rem; } img.plot { max-width: 100%; height: auto; display: block; }
ol.findings li { margin-bottom: 0.6rem; } .advice { color: #555; }
"""


def page(title: str, nav: list[tuple[str, str]], body: str) -> str:
    links = "".join(f'<a href="#{escape(anchor)}">{text(name)}</a>' for anchor, name in nav)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n"
            f"<h1>{text(title)}</h1>\n<nav>{links}</nav>\n{body}</main>\n</body>\n</html>\n")
