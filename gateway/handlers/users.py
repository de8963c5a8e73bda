"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the user store
(gateway/users.py) as Kafka's tools manage it (`kafka-configs --entity-type users
--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`, AdminClient's
describe/alterUserScramCredentials).

The client salts and hashes the password itself; the request carries the salt, the
iteration count and the salted password, from which the credential is derived here (the
salted password is not kept either). Checks and errors as Kafka's controller makes them:
a user named twice in one request (even for two mechanisms), DUPLICATE_RESOURCE; no name, or iterations outside
4096-16384, UNACCEPTABLE_CREDENTIAL; an unknown mechanism, UNSUPPORTED_SASL_MECHANISM;
deleting or describing what does not exist, RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import collections

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
from kio.schema.errors import ErrorCode

from ...protocol.answers import (
    AlterUserScramCredentialsAnswer,
    AlterUserScramCredentialsResultAnswer,
    DescribeUserScramCredentialsAnswer,
    DescribeUserScramCredentialsCredentialInfoAnswer,
    DescribeUserScramCredentialsResultAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...protocol.scram import ITERATIONS_MAX, ITERATIONS_MIN, Credential
from .. import users
from ..context import Context
from .api import handles

Problem = tuple[ErrorCode, str]


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
async def describe_user_scram_credentials(ctx: Context, header: RequestHeader,
                                          request: DescribeUserScramCredentialsRequest,
                                          ) -> DescribeUserScramCredentialsAnswer:
    dynamic = ctx.topics.dynamic
    asked = [user.name for user in request.users] if request.users else users.names(dynamic)
    counted = collections.Counter(asked)
    results: list[DescribeUserScramCredentialsResultAnswer] = []
    for name in dict.fromkeys(asked):
        found = users.credentials(dynamic, name)
        if counted[name] > 1:
            results.append(_described(name, ErrorCode.duplicate_resource,
                                      f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
        elif not found:
            results.append(_described(name, ErrorCode.resource_not_found,
                                      f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            infos: list[DescribeUserScramCredentialsCredentialInfoAnswer] = [
                {"mechanism": users.IDS[mechanism], "iterations": credential.iterations}
                for mechanism, credential in sorted(found.items())]
            results.append({"user": name, "error_code": ErrorCode.none, "error_message": None,
                            "credential_infos": infos})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results}


def _described(name: str, code: ErrorCode, message: str) -> DescribeUserScramCredentialsResultAnswer:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def alter_user_scram_credentials(ctx: Context, header: RequestHeader,
                                       request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsAnswer:
    """As Kafka's controller takes them: the deletions, then the upsertions, in order; a
    user's first refusal is its answer; a user named a second time (for any mechanism) once
    its first alteration was accepted is DUPLICATE_RESOURCE and nothing of it changes."""
    dynamic = ctx.topics.dynamic
    problems: dict[str, Problem] = {}
    accepted: dict[str, tuple[str, Credential | None]] = {}  # user -> (mechanism, credential or None: delete)
    for deletion in request.deletions:
        mechanism = users.MECHANISM_IDS.get(deletion.mechanism, "")
        problem = _name_problem(deletion.name, deletion.mechanism)
        if problem is None and users.credential(dynamic, deletion.name, mechanism) is None:
            problem = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        _take(problems, accepted, deletion.name, problem, (mechanism, None))
    for upsertion in request.upsertions:
        mechanism = users.MECHANISM_IDS.get(upsertion.mechanism, "")
        problem = _name_problem(upsertion.name, upsertion.mechanism) or _iterations_problem(upsertion.iterations)
        made = None if problem else Credential.of_salted(mechanism, upsertion.salt, upsertion.salted_password,
                                                         upsertion.iterations)
        _take(problems, accepted, upsertion.name, problem, (mechanism, made))
    results: list[AlterUserScramCredentialsResultAnswer] = []
    for name, (mechanism, made) in accepted.items():
        await users.change(ctx.topics, name, {mechanism: made})
        results.append({"user": name, "error_code": ErrorCode.none, "error_message": None})
    results += [{"user": name, "error_code": code, "error_message": message}
                for name, (code, message) in problems.items()]
    return {"throttle_time": 0, "results": results}


def _take(problems: dict[str, Problem], accepted: dict[str, tuple[str, Credential | None]], name: str,
          problem: Problem | None, change: tuple[str, Credential | None]) -> None:
    if name in problems:
        return
    if name in accepted:
        del accepted[name]
        problems[name] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
    elif problem is not None:
        problems[name] = problem
    else:
        accepted[name] = change


def _name_problem(name: str, mechanism: int) -> Problem | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in users.MECHANISM_IDS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _iterations_problem(iterations: int) -> Problem | None:
    if iterations < ITERATIONS_MIN:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations > ITERATIONS_MAX:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None
