"""What runs: from an arm of a profile to a serving process, in a container or on this host.

    spec            an arm -> the container (image, command, devices, ports, env, volumes, labels)
    docker_runtime  bring a spec up and down through the Docker SDK (honours DOCKER_HOST)
    local_runtime   the same interface for a subprocess in its own process group
    ready           wait for /v1/models then /health; fail with the log tail, summary first
    bringup         up/down an arm of a profile with either runtime; arm status.json; several side by side
    telemetry       GPU (NVML / nvidia-smi) and host samples to telemetry.jsonl during a cell
    sglang_flags    generated SGLang command lines checked against SGLang's real flag set
    images          the local base image and the reference engine's image
    offline/        Python bundles for a GPU machine with no network and no Docker
"""
