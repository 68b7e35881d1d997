"""What each ``isolane`` command does (``isolane/cli.py`` parses the command line), one module a
command: ``inspect`` (``isolane inspect``: a capture summarised per tenant), ``replay`` with
``replay_bursts`` and ``replay_profiles`` (``isolane replay``: captures through a policy, the
microbursts and profile switches it saw), ``gen`` (``isolane gen``: an incident's traffic), and
``diff`` with ``diff_overlap`` (``isolane diff``: two captures compared, the neighbour named).
``isolane.replay`` is re-exported by the package; the report it returns lives in
:mod:`isolane.report`.
"""
