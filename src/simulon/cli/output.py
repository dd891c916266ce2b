"""Terminal tables; rich is imported only when a table is printed, to keep start-up light."""

from __future__ import annotations


def print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(highlight=False, soft_wrap=True).print(table)
