# nbgrader settings of a student's server. nbgrader's exchange names a submission after the
# Unix user (nbgrader.utils.get_username), except in containers whose user is "jovyan", where
# it takes JUPYTERHUB_USER. Servers that share one Unix user otherwise (a local test spawner)
# name it the same way here.
import os

c = get_config()  # noqa: F821 - provided by nbgrader

if os.environ.get("JUPYTERHUB_USER"):
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
