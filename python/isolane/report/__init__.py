"""A replay report (the dict ``isolane replay --json`` prints) as pictures and as one
self-contained HTML page: :func:`isolane.report.plot.plot_report` writes PNGs (matplotlib, the
optional extra ``isolane[plot]``), :func:`isolane.report.html.html_report` makes the page.
Both take the report as its JSON dict, so that a report saved earlier can be drawn again."""
