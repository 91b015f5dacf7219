"""The hostile corpus and ``caplet selftest``: every attack caplet is tried against, as data.

A security tool is only as trusted as the evidence behind it, and evidence
that only exists in the project's test suite cannot be checked on the
machine where caplet actually runs. So the attacks live here, inside the
installed package: one module per attack family (``_filesystem``,
``_network``, ``_processes``, ``_multiplying``, ``_resources``, ``_ctx_stores``, ``_protocol``,
``_introspection``, ``_supply_chain``, ``_auditor``), each case a small
hostile plugin (source, manifest additions), the attack's name, the layer
expected to stop it and a check of what the caller saw. :mod:`._corpus`
collects them; :mod:`._bench` runs them against a real
:class:`~caplet._host._host.PluginHost` in a throw-away arena and proves
containment after each one; :mod:`._report` turns the results into the
table ``caplet selftest`` prints, ``--json`` and ``--write`` (docs/security.md).

The test suite (tests/_selftest) runs the same :data:`~._corpus.CASES`
through the same :class:`~._bench.Bench`, one test per case.
"""
