# The monitor: `docker run -p 8501:8501 -v $PWD/runs:/runs cliffwatch`
# serves the dashboard and /api for the runs mounted at /runs.
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
