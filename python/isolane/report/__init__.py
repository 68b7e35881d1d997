"""The report of a replay (``docs/report.md``): :mod:`~isolane.report.model` (what it holds and
its JSON), :mod:`~isolane.report.timeline` (the series over time), :mod:`~isolane.report.table`
(the terminal table) and :mod:`~isolane.report.text` (numbers for people). The package's
public names are re-exported by ``isolane`` (``isolane.Report``, ``isolane.format_report``)."""
