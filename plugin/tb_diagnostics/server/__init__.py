"""The tab's data layer: a cached log dir scan, lazy bounded loading, and route payloads.

Routes in :mod:`tb_diagnostics.tb_plugin` only parse parameters, call the
:class:`DataProvider` and respond; no analysis happens in a handler.
"""

from tb_diagnostics.server.provider import DataProvider
from tb_diagnostics.server.requests import BadRequest, NotFound, RequestError

__all__ = ["BadRequest", "DataProvider", "NotFound", "RequestError"]
