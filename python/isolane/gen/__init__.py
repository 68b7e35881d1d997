"""Realistic multi-tenant AI-cluster traffic that reproduces the field's incidents
(``isolane gen``, ``docs/scenarios.md``).

One module a job: :mod:`~isolane.gen.templates` (the header stacks, built once with scapy),
:mod:`~isolane.gen.workloads` (all-reduce, inference, checkpoint and control traffic as numpy
arrays), :mod:`~isolane.gen.frames` (those arrays turned into packets), :mod:`~isolane.gen.pcapwriter`
(a nanosecond pcap written in one go), :mod:`~isolane.gen.scenarios` (the incidents, each with
its policy) and :mod:`~isolane.gen.yamlwriter` (the policies as YAML).
"""
