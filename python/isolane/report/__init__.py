"""The report of a replay (``docs/report.md``): :mod:`~isolane.report.model` (what it holds and
its JSON), :mod:`~isolane.report.timeline` (the series over time),
:mod:`~isolane.report.isolation` (how well each tenant was kept from the others),
:mod:`~isolane.report.table` (the terminal table), :mod:`~isolane.report.schema` (the JSON's
schema), :mod:`~isolane.report.plot` (PNGs, with matplotlib: the optional extra
``isolane[plot]``) and :mod:`~isolane.report.html` (one self-contained page), the last two taking
the report as its JSON dict, so that a report saved earlier can be drawn again. The public names
are re-exported by ``isolane`` (``isolane.Report``, ``isolane.format_report``)."""
