# The course's pytest plugin: the gpu marker, the GPU record and the page-block runner.
pytest_plugins = ["course.pytest_plugin"]
