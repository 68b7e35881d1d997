"""What each ``isolane`` command does (``isolane/cli.py`` parses the command line), one module a
command: ``inspect`` (``isolane inspect``: a capture summarised per tenant), ``replay`` and
``replay_bursts`` (``isolane replay``: a capture through a policy, and the microbursts it saw).

``isolane.replay`` is these modules'
public names, re-exported by the package.
"""
