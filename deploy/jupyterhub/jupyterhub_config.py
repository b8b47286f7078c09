"""JupyterHub configuration for a class taking the pecourse exercises through nbgrader.

Load it as it is (`jupyterhub -f deploy/jupyterhub/jupyterhub_config.py`), drop it into The
Littlest JupyterHub's /opt/tljh/config/jupyterhub_config.d/, or load it from a site file with
`load_subconfig(...)` before the site's own choices. It configures, for JupyterHub 5.2-6.x
(option names checked against 6.1.1):

- two groups, instructors and students, from PECOURSE_INSTRUCTORS / PECOURSE_STUDENTS;
- every user's server gets nbgrader's course id and shared exchange directory
  (jupyter/common/nbgrader_config.py); instructors get the formgrader and a course directory
  (jupyter/instructors/), students get the assignment list without the formgrader,
  the course list or the assignment creator (jupyter/students/);
- memory and CPU limits per user where the site set none, which the spawners that can
  enforce them apply.

It sets c.Spawner.pre_spawn_hook: a site that needs its own hook calls pecourse_pre_spawn
from it.

Authentication and spawning are the site's choice and are left at JupyterHub's defaults
(PAM and local processes, as TLJH has them): README.md beside this file shows OAuth,
DockerSpawner and KubeSpawner. Site settings come from the environment of the Hub:

PECOURSE_COURSE_ID      nbgrader's course id (default: pecourse)
PECOURSE_EXCHANGE       the exchange directory every server sees (default: /usr/local/share/nbgrader/exchange)
PECOURSE_INSTRUCTORS    comma-separated user names of the instructors group
PECOURSE_STUDENTS       comma-separated user names of the students group
PECOURSE_COURSE_ROOT    the instructors' course directory, under their home (default: ~/course)
PECOURSE_JUPYTER_CONFIG where the servers find the jupyter/ folder beside this file (default:
                        that folder; set it when servers run in containers that hold a copy)
PECOURSE_MEM_LIMIT, PECOURSE_CPU_LIMIT   per-user limits (default: 2G and 1 CPU)
"""

import os

c = get_config()  # noqa: F821 - provided by JupyterHub


def _names(variable):
    return sorted({n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()})


COURSE_ID = os.environ.get("PECOURSE_COURSE_ID", "pecourse")
EXCHANGE = os.environ.get("PECOURSE_EXCHANGE", "/usr/local/share/nbgrader/exchange")
INSTRUCTORS = _names("PECOURSE_INSTRUCTORS")
STUDENTS = _names("PECOURSE_STUDENTS")
# Zero to JupyterHub runs the files of its jupyterhub_config.d with exec(), without __file__:
# there the servers' image holds the folder and PECOURSE_JUPYTER_CONFIG names it.
JUPYTER_CONFIG = os.environ.get("PECOURSE_JUPYTER_CONFIG") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "jupyter"
)
COURSE_ROOT = os.environ.get("PECOURSE_COURSE_ROOT", "~/course")
MEM_LIMIT = os.environ.get("PECOURSE_MEM_LIMIT", "2G")
CPU_LIMIT = float(os.environ.get("PECOURSE_CPU_LIMIT", "1"))

if set(INSTRUCTORS) & set(STUDENTS):
    raise ValueError(
        "PECOURSE_INSTRUCTORS and PECOURSE_STUDENTS share "
        f"{sorted(set(INSTRUCTORS) & set(STUDENTS))}: a user is in one group or the other"
    )

c.JupyterHub.load_groups = {
    "instructors": {"users": INSTRUCTORS},
    "students": {"users": STUDENTS},
}
# Only the class logs in (the authenticator may widen this, e.g. an OAuth organisation).
if INSTRUCTORS or STUDENTS:
    c.Authenticator.allowed_users = set(INSTRUCTORS) | set(STUDENTS)

c.Spawner.default_url = "/lab"


def pecourse_role(groups):
    """The folder of Jupyter configuration a user's server reads: instructors or students.

    Anyone not in the instructors group is a student: the formgrader (which reads every
    submission and the hidden tests) is never the default."""
    return "instructors" if "instructors" in groups else "students"


def pecourse_pre_spawn(spawner):
    """Point the server at its group's Jupyter configuration (JUPYTER_CONFIG_PATH is read
    before the environment's own etc/jupyter, so a student's settings there win)."""
    role = pecourse_role({g.name for g in spawner.user.groups})
    # Per-user limits, unless the site set its own (TLJH's `tljh-config set limits.memory`,
    # Zero to JupyterHub's singleuser.memory.limit, c.DockerSpawner.mem_limit): set here, on
    # the spawner, because TLJH loads this file as a sub-config that cannot see the site's.
    # DockerSpawner, KubeSpawner and TLJH's systemdspawner enforce them; JupyterHub's
    # LocalProcessSpawner only passes them on as MEM_LIMIT / CPU_LIMIT.
    if not spawner.mem_limit:
        spawner.mem_limit = MEM_LIMIT
    if not spawner.cpu_limit:
        spawner.cpu_limit = CPU_LIMIT
    # set here rather than in c.Spawner.environment, which a spawner's own
    # c.KubeSpawner.environment (Zero to JupyterHub's singleuser.extraEnv) would replace
    spawner.environment.update(
        {
            "JUPYTER_CONFIG_PATH": os.pathsep.join(
                [os.path.join(JUPYTER_CONFIG, role), os.path.join(JUPYTER_CONFIG, "common")]
            ),
            "PECOURSE_ROLE": role,
            "PECOURSE_COURSE_ID": COURSE_ID,
            "PECOURSE_EXCHANGE": EXCHANGE,
            "PECOURSE_COURSE_ROOT": COURSE_ROOT,
        }
    )


c.Spawner.pre_spawn_hook = pecourse_pre_spawn
