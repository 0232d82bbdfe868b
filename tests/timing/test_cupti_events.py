"""Reading device activities from Kineto's events: with and without an activity type (torch 2.11
lacks it), host events and device-side annotations left out, sorted by start."""

from __future__ import annotations

from torch.autograd import DeviceType

from solbench.timing.cupti import _kineto_device_events


class _Event:
    def __init__(self, name, start_us, dur_us, stream=7, device=DeviceType.CUDA, activity=None,
                 annotation=False):
        self._v = (name, start_us, dur_us, stream, device, activity, annotation)  # no activity_type(): torch 2.11

    def name(self):
        return self._v[0]

    def start_ns(self):
        return int(self._v[1] * 1000)

    def duration_ns(self):
        return int(self._v[2] * 1000)

    def device_resource_id(self):
        return self._v[3]

    def device_type(self):
        return self._v[4]

    def is_user_annotation(self):
        return self._v[6]


class _Typed(_Event):
    def activity_type(self):
        return self._v[5]


class _Results:
    def __init__(self, events):
        self._events = events

    def events(self):
        return self._events


def test_events_without_activity_type_are_told_by_device_and_name():
    raw = [_Event("void spin<...>", 30, 10), _Event("cudaLaunchKernel", 1, 2, device=DeviceType.CPU),
           _Event("Memcpy HtoD (Pageable -> Device)", 5, 3, stream=9), _Event("Memset (Device)", 20, 1),
           _Event("my_range", 0, 100, annotation=True)]
    got = _kineto_device_events(_Results(raw))
    assert [(e["name"], e["cat"]) for e in got] == [("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"),
                                                    ("Memset (Device)", "gpu_memset"), ("void spin<...>", "kernel")]
    assert got[0]["stream"] == 9 and got[2]["ts_us"] == 30 and got[2]["dur_us"] == 10


def test_events_with_activity_type_keep_device_categories_only():
    raw = [_Typed("k", 4, 1, activity="kernel"), _Typed("aten::add", 1, 1, activity="cpu_op"),
           _Typed("ann", 0, 9, activity="gpu_user_annotation"), _Typed("Memcpy DtoD", 2, 1, activity="gpu_memcpy")]
    got = _kineto_device_events(_Results(raw))
    assert [(e["name"], e["cat"]) for e in got] == [("Memcpy DtoD", "gpu_memcpy"), ("k", "kernel")]
