"""The execution tool's kernel channels wait in short slices (pecourse.notebook_tools)."""

from __future__ import annotations

import asyncio
import os
from queue import Empty

import pytest

from pecourse import notebook_tools
from pecourse.notebook_tools import POLL_SLICE, SlicedChannel


class Socket:
    """Stands in for a kernel socket. ``missed`` polls see nothing and sleep their whole
    timeout, as pyzmq's asyncio poll does when it misses a wake-up; later polls find the
    message (``ready``) or nothing."""

    def __init__(self, missed: int, ready: bool = True):
        self.missed, self.ready, self.polls = missed, ready, []

    async def poll(self, timeout_ms):
        self.polls.append(timeout_ms)
        if len(self.polls) <= self.missed or not self.ready:
            await asyncio.sleep(timeout_ms / 1000)
            return 0
        return 1


def _channel(socket):
    channel = SlicedChannel.__new__(SlicedChannel)  # its constructor insists on a real socket
    channel.socket = socket

    async def recv():
        return {"msg_type": "execute_reply"}

    channel._recv = recv
    return channel


def test_a_missed_wake_up_costs_one_slice_not_the_timeout():
    socket = Socket(missed=1)
    msg = asyncio.run(_channel(socket).get_msg(timeout=600))
    assert msg == {"msg_type": "execute_reply"}
    # the plain channel polls once for all 600 s; this one never waits longer than a slice
    assert socket.polls == [int(1000 * POLL_SLICE)] * 2


def test_no_message_is_empty_after_the_timeout():
    socket = Socket(missed=0, ready=False)
    with pytest.raises(Empty):
        asyncio.run(_channel(socket).get_msg(timeout=0.6))
    assert max(socket.polls) <= 1000 * POLL_SLICE
    # the timeout in slices (less the moments between polls); then a last, shorter one
    assert 550 <= sum(socket.polls) <= 600 and socket.polls[-1] < 1000 * POLL_SLICE


def test_no_timeout_waits_slice_by_slice_until_a_message():
    socket = Socket(missed=3)
    assert asyncio.run(_channel(socket).get_msg()) == {"msg_type": "execute_reply"}
    assert socket.polls == [int(1000 * POLL_SLICE)] * 4


def test_the_tool_and_the_nbgrader_course_use_the_sliced_channels(tmp_path):
    from pecourse.exercises.nbgrader import write_course

    manager = notebook_tools.SlicedKernelManager(kernel_name="python3")
    client = manager.client()
    assert isinstance(client.shell_channel, SlicedChannel)
    assert isinstance(client.iopub_channel, SlicedChannel)
    write_course(tmp_path)
    config = (tmp_path / "nbgrader_config.py").read_text()
    assert 'kernel_manager_class = "pecourse.notebook_tools.SlicedKernelManager"' in config


def test_the_kernel_waits_passively_unless_told_otherwise(tmp_path, monkeypatch):
    import nbformat

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os\nprint(os.environ.get('OMP_WAIT_POLICY'))")]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / "omp.ipynb"
    nbformat.write(nb, path)
    notebook_tools.execute(path)
    outputs = nbformat.read(path, as_version=4).cells[0].outputs
    assert outputs[0]["text"].strip() == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ  # only the kernel's environment is set
