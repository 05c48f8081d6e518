"""run-all's bridge to tests/e2e/util.py, so the driver matrix configures and waits for a Helenus
node exactly like the end-to-end tests do. run-all itself starts the binary and signals it by PID.

  python helenus_node.py binary              prints the binary tests/e2e would use
  python helenus_node.py config DIR          writes DIR/helenus.yaml for a free port; prints the port
  python helenus_node.py wait PORT PID       waits until 127.0.0.1:PORT answers CQL, or fails early
                                             if process PID has exited
  python helenus_node.py cluster-start BIN DIR N
                                             `helenus cluster start --nodes N` in DIR on ports free
                                             on 127.0.0.1..N; prints the CQL port
  python helenus_node.py cluster-stop BIN DIR N
                                             stops it (SIGKILLs any node left, by its pid)

Runs with the Python venv of tests/requirements.txt (util imports cassandra-driver).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import util  # noqa: E402  (tests/e2e/util.py)


def process_alive(pid):
    """True while PID runs; a zombie (exited, not yet reaped by run-all) counts as exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "binary":
        print(util.default_helenus_bin())
    elif command == "config":
        # The binary is not needed to write the config; run-all starts it.
        node = util.HelenusNode(binary="unused", directory=args[0], cluster_name="helenus-drivers")
        node.write_config()
        print(node.port)
    elif command == "wait":
        port, pid = int(args[0]), int(args[1])
        try:
            util.wait_for_cql("127.0.0.1", port, util.NODE_START_TIMEOUT_S,
                              alive=lambda: process_alive(pid))
        except (RuntimeError, TimeoutError) as e:
            sys.exit(f"helenus_node.py: {e}")
    elif command in ("cluster-start", "cluster-stop"):
        binary, directory, nodes = args[0], Path(args[1]), int(args[2])
        cluster = util.LocalCluster(binary, directory, nodes)
        if command == "cluster-start":
            # The ports are kept beside the nodes, for cluster-stop.
            try:
                cluster.start()
            except RuntimeError as e:
                sys.exit(f"helenus_node.py: {e}")
            print(cluster.cql_port)
        else:
            cluster.destroy()
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
