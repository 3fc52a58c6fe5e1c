"""The status page of a container: ``/`` (HTML) and ``/status.json`` on its HTTP ports."""

from samzapy.status.attach import RunningStatus, start_status
from samzapy.status.report import StatusReport, StatusSampler

__all__ = ["RunningStatus", "StatusReport", "StatusSampler", "start_status"]
