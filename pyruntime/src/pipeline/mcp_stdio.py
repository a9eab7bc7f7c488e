# The harness of a stdio MCP server (`/tools/mcp-stdio`): runs as a Python tool (the
# same confined child of the workspace's zygote: namespaces, view, Landlock, seccomp,
# cgroup, rlimits, network policy) and becomes the server. The server's stdin and
# stdout are two FIFOs in the run's work directory that the runtime holds the other
# ends of; stderr stays the run's stderr file. Nothing of Python is left once the
# command is exec'd: the server is the run's process.
import os
import sys


def main(weir_mcp):
    spec = weir_mcp
    command, args = spec["command"], spec["args"]
    # Opening a FIFO waits for its other end: the runtime opened both before the run.
    requests = os.open(spec["stdin"], os.O_RDONLY)
    answers = os.open(spec["stdout"], os.O_WRONLY)
    os.dup2(requests, 0)
    os.dup2(answers, 1)
    os.close(requests)
    os.close(answers)
    try:
        os.execvpe(command, [command, *args], spec["env"])
    except OSError as err:
        sys.stderr.write(f"cannot start the MCP server `{command}`: {err.strerror or err}\n")
        sys.stderr.flush()
        os._exit(127)
