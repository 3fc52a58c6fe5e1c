"""The status page of a container: ``/`` (HTML) and ``/status.json`` on its HTTP ports."""

from samzapy.status.report import StatusReport, StatusSampler
from samzapy.status.serving import RunningStatus, start_status

__all__ = ["RunningStatus", "StatusReport", "StatusSampler", "start_status"]
