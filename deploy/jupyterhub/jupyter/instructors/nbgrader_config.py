# nbgrader settings of an instructor's server: the course directory, under the home directory
# (the formgrader needs it inside the server's root). `pecourse exercises nbgrader ~/course`
# fills it; its own nbgrader_config.py adds the execution settings.
import os

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.root = os.path.expanduser(os.environ.get("PECOURSE_COURSE_ROOT", "~/course"))
