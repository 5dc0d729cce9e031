"""Derived views shared by the rules (and the tab), each memoized per span.

Every public function here takes a :class:`~tb_diagnostics.analysis.span.SpanAnalysis`
and is decorated with :func:`~tb_diagnostics.analysis.span.computed`, so the first rule
that asks pays for it and every later one gets the same object:

- :mod:`.artefacts` — profiler artefacts (buffer requests, the flush sync, the
  first-launch offset) that no other figure may blame on the user;
- :mod:`.hierarchy` — op ancestry: the op that launched a device activity, the op the
  user called;
- :mod:`.tables` — the profiler table (per op name) and kernel instances per step;
- :mod:`.gaps` — device idle gaps between kernels inside a step;
- :mod:`.launch` — CPU launch → device start delays;
- :mod:`.pystack` — the Python line behind a row (``python_function`` events or the
  2021 ``Call stack`` string);
- :mod:`.memory` — allocated/reserved memory per step and device;
- :mod:`.compiled` — torch.compile markers per step;
- :mod:`.warmth` — cold first step and record_function dead windows.
"""
