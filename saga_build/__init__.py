"""What building and deploying the stack use beside the CDK: botocore's data reduced for the
Lambda asset (`python -m saga_build.trim_models`) and AWS's own validation of the synthesized
definition before `cdk deploy` (`make validate-aws`: saga_build.validate_aws)."""
