# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-rulebook as the EDA tests run it (make eda): one process of the decision environment's venv on a
collection rulebook, its output in a log file that the tests read (each playbook run ends with a PLAY RECAP)."""
import os
import subprocess
import time

from lib.wait import wait_for


class Rulebook(object):
    """``ansible-rulebook -r <rulebook> -i <inventory> --vars <vars> -v`` in ``cwd``, output to ``log_path``."""

    def __init__(self, de, rulebook, inventory, variables, cwd, env):
        self.log_path = os.path.join(cwd, "rulebook.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([os.path.join(de.bin, "ansible-rulebook"), "-r", rulebook, "-i", inventory,
                                      "--vars", variables, "-v"],
                                     cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.t0 = time.time()

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        assert self.proc.poll() is None, "ansible-rulebook exited:\n" + self.log()[-4000:]
        return True

    def runs(self):
        return self.log().count("PLAY RECAP")

    def wait_log(self, text, count=1, timeout=120):
        return wait_for(lambda: self.alive() and self.log().count(text) >= count, timeout,
                        what="%d x %r in the rulebook log" % (count, text))

    def wait_runs(self, n, timeout=180):
        # a run is done when its recap is printed
        wait_for(lambda: self.alive() and self.runs() >= n, timeout, what="%d playbook runs in the rulebook log" % n)
        return self.runs()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
