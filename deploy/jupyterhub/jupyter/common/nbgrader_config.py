# nbgrader settings every server of the class reads (instructors' and students'): the course
# and the exchange directory that releases, submissions and feedback pass through.
import os

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = os.environ.get("PECOURSE_COURSE_ID", "pecourse")
c.Exchange.root = os.environ.get("PECOURSE_EXCHANGE", "/usr/local/share/nbgrader/exchange")
