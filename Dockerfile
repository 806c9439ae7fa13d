# The monitor: `docker build .` builds it, with any builder (the CUDA trainer is Dockerfile.gpu,
# a file of its own, so that a builder which builds every stage of a file never needs its base).
#
#   docker build -t cliffwatch .
#   docker run -p 8501:8501 -v $PWD/runs:/runs cliffwatch     # serves the runs in /runs
#
# The monitor binds 0.0.0.0 inside the container, so it asks for a token: pass your own with
# `-e CLIFFWATCH_TOKEN=...`, or open the URL with `?token=` that it prints at start-up.
#
# BASE is the official python:3.11-slim. Where no image registry can be reached, `make
# image-check` builds a stand-in from Debian's packages (docker/standin-base.sh) and passes it.
ARG BASE=python:3.11-slim
FROM ${BASE} AS monitor
WORKDIR /opt/cliffwatch
COPY requirements-app.txt .
RUN pip install --no-cache-dir -r requirements-app.txt
COPY app app
COPY queries queries
COPY samples samples
# compiled here, once: a container's every start would compile each module again (about
# 0.35 s of the server's imports, timed by hand)
RUN python -m compileall -q app
ENV PYTHONUNBUFFERED=1
EXPOSE 8501
VOLUME /runs
CMD ["python", "-m", "app", "serve", "--logdir", "/runs", "--host", "0.0.0.0", "--port", "8501"]
