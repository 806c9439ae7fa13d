# Two images from one file. The monitor is the last stage, so a plain `docker build` builds it.
#
#   docker build -t cliffwatch .                              # CPU: the monitor only
#   docker run -p 8501:8501 -v $PWD/runs:/runs cliffwatch     # serves the runs in /runs
#
# The monitor binds 0.0.0.0 inside the container, so it asks for a token: pass your own with
# `-e CLIFFWATCH_TOKEN=...`, or open the URL with `?token=` that it prints at start-up.
#
#   docker build --target gpu -t cliffwatch-gpu .             # CUDA: trainer with flash-attn
#   docker run --gpus all -v $PWD/runs:/runs cliffwatch-gpu \
#       python -m trainer --out /runs/demo --preset demo --attn=flash

# The trainer on CUDA. flash-attn is kept out of requirements.txt: it builds against the
# installed CUDA torch (nvcc and ninja from the devel image; MAX_JOBS bounds build memory).
FROM nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04 AS gpu
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
        python3.11-dev git ninja-build && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 MAX_JOBS=4
WORKDIR /opt/cliffwatch
COPY requirements.txt requirements-app.txt ./
# PyPI's torch wheel for Linux x86_64 is the CUDA build; flash-attn compiles against it
RUN pip install --no-cache-dir -r requirements.txt \
    && pip install --no-cache-dir --no-build-isolation flash-attn==2.8.3.post2
COPY . .
CMD ["python", "-m", "trainer", "--out", "/runs/demo", "--preset", "demo", "--attn=flash"]

# The monitor (last, so `docker build .` without --target builds this one).
FROM python:3.11-slim AS monitor
WORKDIR /opt/cliffwatch
COPY requirements-app.txt .
RUN pip install --no-cache-dir -r requirements-app.txt
COPY app app
COPY queries queries
COPY samples samples
ENV PYTHONUNBUFFERED=1
EXPOSE 8501
VOLUME /runs
CMD ["python", "-m", "app", "serve", "--logdir", "/runs", "--host", "0.0.0.0", "--port", "8501"]
