"""The synthesized template's policies, resolved in one account's terms, per role.

For each AWS::IAM::Role: its trust policy and every identity policy attached to it (its inline
`Policies`, AWS::IAM::Policy and AWS::IAM::ManagedPolicy resources naming it, managed policies
it names); for each AWS::KMS::Key its key policy, keyed by the key's ARN. Intrinsic functions
are resolved with the local provisioning's resolver, so ARNs are the ones the recorded calls
name. A reference to an AWS managed policy raises UnsupportedPolicy: its statements are not in
the template, and a check must not guess them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from local_aws.provision import ProvisionResult
from local_aws.template import PhysicalResource, ResolutionContext
from offline_iam.conditions import UnsupportedPolicy
from offline_iam.evaluate import Grants, PolicyDocument, Principal
from offline_iam.requests import Account

ROLE = "AWS::IAM::Role"
POLICY = "AWS::IAM::Policy"
MANAGED_POLICY = "AWS::IAM::ManagedPolicy"
KEY = "AWS::KMS::Key"
# The resource part of the ARNs whose shape a policy's condition or pattern relies on (the
# requests offline_iam.requests computes name tables so); other kinds get `<service>:<id>`.
_ARN_RESOURCE = {"AWS::DynamoDB::Table": "table/{}"}


@dataclass(frozen=True)
class RolePolicies:
    logical_id: str
    arn: str
    role_id: str
    trust: PolicyDocument
    identity: tuple[PolicyDocument, ...]

    def session_context(self, *, mfa: bool, session: str = "sagactl") -> dict[str, Any]:
        """The global condition keys of a session of this role (aws:userid is the role's
        unique id and the session name)."""
        context: dict[str, Any] = {
            "aws:PrincipalArn": self.arn,
            "aws:PrincipalAccount": self.arn.split(":")[4],
            "aws:PrincipalType": "AssumedRole",
            "aws:userid": f"{self.role_id}:{session}",
        }
        if mfa:
            context["aws:MultiFactorAuthPresent"] = True
        return context


@dataclass(frozen=True)
class StackPolicies:
    account_id: str
    roles: Mapping[str, RolePolicies]  # by logical id
    key_policies: Mapping[str, PolicyDocument]  # key ARN -> key policy
    role_of_function: Mapping[str, str] = field(default_factory=dict)  # function id -> role id

    def grants(self, role_logical_id: str) -> Grants:
        role = self.roles[role_logical_id]
        return Grants(
            principal=Principal(role.arn, self.account_id),
            identity=role.identity,
            resource_policies=self.key_policies,
            policy_required=frozenset(self.key_policies),
        )


def offline_resolver(
    template: Mapping[str, Any],
    stack_name: str,
    *,
    account_id: str = "123456789012",
    region: str = "us-east-1",
) -> ResolutionContext:
    """A resolver for a template alone (no local AWS): every resource gets a placeholder ARN of
    its service, named by its logical id; a role also a RoleId. Enough to evaluate who may do
    what with the template's own resources."""

    def placeholder(logical_id: str) -> PhysicalResource:
        kind = str(template["Resources"][logical_id]["Type"])
        service = kind.split("::")[1].lower()
        if kind == ROLE:
            arn = f"arn:aws:iam::{account_id}:role/{logical_id}"
            return PhysicalResource(logical_id, {"Arn": arn, "RoleId": f"AROA{logical_id.upper()}"})
        resource = _ARN_RESOURCE.get(kind, "{}").format(logical_id)
        arn = f"arn:aws:{service}:{region}:{account_id}:{resource}"
        return PhysicalResource(logical_id, {"Arn": arn, "Name": logical_id, "KeyId": logical_id})

    return ResolutionContext(
        stack_name=stack_name,
        region=region,
        account_id=account_id,
        template=template,
        fallback=placeholder,
    )


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _attached_roles(properties: Mapping[str, Any]) -> list[str]:
    roles = []
    for role in _as_list(properties.get("Roles", [])):
        if not (isinstance(role, Mapping) and "Ref" in role):
            raise UnsupportedPolicy(f"a policy attached to a role not in the template: {role}")
        roles.append(str(role["Ref"]))
    return roles


def stack_policies(template: Mapping[str, Any], resolver: ResolutionContext) -> StackPolicies:
    """Every role's and key's policies in `template`, resolved by `resolver`."""
    resources: Mapping[str, Any] = template["Resources"]
    identity: dict[str, list[PolicyDocument]] = {
        lid: [] for lid, r in resources.items() if r["Type"] == ROLE
    }
    managed: dict[str, PolicyDocument] = {}
    for lid, resource in resources.items():
        properties = resource.get("Properties", {})
        if resource["Type"] in (POLICY, MANAGED_POLICY):
            document = resolver.resolve(properties["PolicyDocument"])
            if resource["Type"] == MANAGED_POLICY:
                managed[lid] = document
            for role in _attached_roles(properties):
                identity[role].append(document)
    roles = {}
    for lid, documents in identity.items():
        properties = resources[lid].get("Properties", {})
        documents += [resolver.resolve(p["PolicyDocument"]) for p in properties.get("Policies", [])]
        for arn in properties.get("ManagedPolicyArns", []):
            if isinstance(arn, Mapping) and "Ref" in arn and arn["Ref"] in managed:
                if managed[arn["Ref"]] not in documents:
                    documents.append(managed[arn["Ref"]])
                continue
            raise UnsupportedPolicy(f"role {lid} uses a managed policy not in the template: {arn}")
        roles[lid] = RolePolicies(
            logical_id=lid,
            arn=resolver.get_att(lid, "Arn"),
            role_id=resolver.get_att(lid, "RoleId"),
            trust=resolver.resolve(properties["AssumeRolePolicyDocument"]),
            identity=tuple(documents),
        )
    keys = {
        resolver.get_att(lid, "Arn"): resolver.resolve(r["Properties"]["KeyPolicy"])
        for lid, r in resources.items()
        if r["Type"] == KEY
    }
    functions = {
        lid: r["Properties"]["Role"]["Fn::GetAtt"][0]
        for lid, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function"
    }
    return StackPolicies(
        account_id=resolver.account_id, roles=roles, key_policies=keys, role_of_function=functions
    )


def provisioned_account(template: Mapping[str, Any], provisioned: ProvisionResult) -> Account:
    """What recorded calls are resolved against in a local AWS provisioned from `template`:
    its tables' partition keys, the approval keys' aliases, the stack's id."""
    resolver = provisioned.resolver
    if resolver is None:
        raise ValueError("the stack is not provisioned")
    resources = template["Resources"]
    partition_keys = {
        name: next(
            key["AttributeName"]
            for key in resources[lid]["Properties"]["KeySchema"]
            if key["KeyType"] == "HASH"
        )
        for lid, name in provisioned.tables.items()
    }
    return Account(
        account_id=resolver.account_id,
        partition_keys=partition_keys,
        key_aliases=dict(provisioned.aliases),
        stack_ids={provisioned.stack_name: str(resolver.pseudo("AWS::StackId"))},
    )
