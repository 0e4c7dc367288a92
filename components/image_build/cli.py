"""``python -m rlinf_eks build-image STACK [--family F] [--wait] [--update-stack [STACK]]``.

Builds a training image in the stack's own account with the CodeBuild project its ``pulumi up``
made (images.build), from ``images/<family>/`` of this checkout, and prints the exact
``workload.image`` (repository URI and digest). Exit status: 0 built (or already built), 1 the
build failed (its failed phase and last log lines are printed) or AWS refused a call, 2 bad input
(an unknown stack, images.build off, a family the stack does not build, no project or repository
in the account, no AWS credentials)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from .. import interrupts
from .build import BuildFailed, BuildInputError, Clients, Request, Result, run_build
from .context import ContextError, package
from .stack_file import StackFileError, update_image


def add_parser(commands: Any) -> None:
    from ..offline.engine.arguments import add_stack_arguments

    build = commands.add_parser(
        "build-image", help="build a training image with the stack's CodeBuild project and print workload.image (0 built, 1 failed, 2 bad input)"
    )
    add_stack_arguments(build, stack_help="the stack whose images.build made the ECR repository and CodeBuild project (a name or a stack file's path)")
    build.add_argument("--family", help="the image family (images/<family>/); default: the stack's only one")
    build.add_argument("--wait", action="store_true", help="follow the build (phases, log tail) and print the digest")
    build.add_argument(
        "--update-stack", nargs="?", const="", metavar="STACK",
        help="with --wait: write workload.image into this stack's file (default: STACK itself; a platform's images go to an experiment's)",
    )  # fmt: skip
    build.set_defaults(func=run)


def _fail(status: int, message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status


def _target_family(root: Path, target: str) -> str:
    """The image family the target stack's trainer dialect runs (its run's Dockerfile)."""
    from ..experiment import role_of, stack_data
    from ..offline.engine.stack_config import load
    from ..trainers import recipe_of
    from ..training_image import family_of_dockerfile

    values = load(root, target).values
    if role_of(values) == "platform":
        raise BuildInputError(f"--update-stack {target}: a platform runs no training, so it has no workload.image: name an experiment's stack")
    data, _ = stack_data(values)
    workload = data.get("workload") if isinstance(data.get("workload"), dict) else {}
    trainer = workload.get("trainer") if isinstance(workload.get("trainer"), dict) else {}
    return family_of_dockerfile(recipe_of(str(trainer.get("dialect", "verl-ppo"))).dockerfile)


def prepare(args: argparse.Namespace, root: Path) -> tuple[Request, str, Optional[Path]]:
    """The build request from the stack's settings, checked before any AWS call."""
    from ..config import ConfigError
    from ..experiment import role_of
    from ..offline.outputs import plan as plan_mod
    from ..offline.engine.arguments import load_stack
    from ..offline.engine.stack_config import stack_file_of
    from ..program import image_families

    stack_config = load_stack(args, root=root).config
    args.stack = stack_config.stack  # a stack file's path names its stack (the names below are the stack's)
    if role_of(stack_config.values) == "experiment":
        raise BuildInputError(f"stack {args.stack} is an experiment: its platform builds the images (build-image <platform> --family F "
                              f"--update-stack {args.stack})")  # fmt: skip
    try:
        settings = plan_mod.settings_of(stack_config)
    except ConfigError as err:
        raise BuildInputError(f"stack {args.stack}: {err}") from None
    if not settings.images.build:
        raise BuildInputError(f"stack {args.stack}: images.build is off: set images.build: true and run pulumi up to create the "
                              "ECR repository and CodeBuild project")  # fmt: skip
    families = image_families(settings)
    family = args.family or (families[0] if len(families) == 1 else None)
    if family is None:
        raise BuildInputError(f"stack {args.stack} builds {', '.join(families)}: choose one with --family")
    if family not in families:
        raise BuildInputError(f"--family {family}: stack {args.stack} builds {', '.join(families)} (images.families)")
    target_path = None
    if args.update_stack is not None:
        if not args.wait:
            raise BuildInputError("--update-stack needs --wait (the digest is known when the build ends)")
        target = args.update_stack or args.stack
        trains = _target_family(root, target)
        if trains != family:
            raise BuildInputError(f"--update-stack {target}: it trains with the {trains} image, not {family}")
        target_path = stack_file_of(root, target)[1]  # a stack name or a stack file's path
    cache = settings.images.docker_hub_cache
    request = Request(args.stack, family, settings.workload.ray_version, cache.repository_prefix if cache.credential_arn else None)
    return request, settings.region, target_path


def boto3_clients(region: str) -> Clients:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(region_name=region)
    config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 5, "mode": "standard"})
    return Clients(*(session.client(name, config=config) for name in ("codebuild", "s3", "ecr", "logs")))


def run(
    args: argparse.Namespace,
    clients_for: Callable[[str], Clients] = boto3_clients,
    sleep: Optional[Callable[[float], None]] = None,
    root: Optional[Path] = None,
) -> int:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from ..offline.engine.stack_config import StackConfigError, project_root

    try:
        root = root or project_root()
        request, region, target = prepare(args, root)
        context = package(root / "images", request.family)
    except (StackConfigError, BuildInputError, ContextError) as err:
        return _fail(2, str(err))

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        clients = clients_for(region)
        kwargs = {"sleep": sleep} if sleep is not None else {}
        with interrupts.raising():  # Ctrl-C stops following the build, with the line below
            result = run_build(clients, request, context, region, wait=args.wait, say=say, **kwargs)
    except NoCredentialsError:
        return _fail(2, "no AWS credentials (botocore NoCredentialsError): set AWS_PROFILE, or run aws configure / aws sso login, "
                        f"for the account of stack {request.stack}")  # fmt: skip
    except NoRegionError:
        return _fail(2, f"no AWS region: set aws:region in stack {request.stack}")
    except BuildInputError as err:
        return _fail(2, str(err))
    except BuildFailed as err:
        return _fail(1, str(err))
    except ClientError as err:
        info = err.response.get("Error", {})
        return _fail(1, f"AWS refused {err.operation_name}: {info.get('Code')}: {info.get('Message')}")
    except BotoCoreError as err:
        return _fail(1, f"AWS call failed: {err}")
    except KeyboardInterrupt:
        # stops following only: the build goes on in CodeBuild (and is found already built next time)
        return _fail(130, "interrupted: stopped following; a started build goes on in CodeBuild (run build-image again with --wait)")
    if result.digest:
        _report(result, request)
    if target is not None and result.digest:
        try:
            update_image(target, result.image)
        except StackFileError as err:
            return _fail(2, str(err))
        print(f"wrote workload.image into {target.relative_to(root) if target.is_relative_to(root) else target}")
    return 0


def _report(result: Result, request: Request) -> None:
    size = f", {result.size_bytes / 1e9:.1f} GB compressed" if result.size_bytes else ""
    print(f"built {result.repository_uri}:{result.tag} ({result.digest}{size})")
    print("workload.image (the digest pins it):")
    print(f"  rlinf-eks:workload:\n    image: {result.image}")
    print(f"  or: pulumi config set --path rlinf-eks:workload.image {result.image}")
