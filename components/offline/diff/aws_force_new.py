"""Which input changes replace an AWS resource, from the provider's own source: for each AWS type
the stacks create, the input paths that terraform-provider-aws (which pulumi-aws 7 bridges) marks
ForceNew or RequiresReplace, and the ones a CustomizeDiff replaces on only under a condition.

Facts, not code: read from hashicorp/terraform-provider-aws file by file (each type's schema file
and the version of it read, a commit or, where the store answered without one, its copy id), with
the Pulumi input names and shapes of the pulumi_aws 7.51 Python SDK (``[*]``: every item of a list
of objects). ``tests/test_aws_force_new.py`` holds this table against ``shared/reference/
terraform-provider-aws/force-new.json`` (the record of that reading) and fails when a stack plans
an AWS type the table lacks. ``regional``: the type lives in a region (TF AWS v6 adds a per-resource ``region`` input that
forces new; no stack sets it, but a change of the stack's ``aws:region`` replaces every regional
resource: offline/diff/verdicts.py); IAM's types are global. A conditional replacement read as
alternatives (``a | b``: a security group rule's source kind) is one entry per alternative.
"""

from __future__ import annotations

from dataclasses import dataclass



@dataclass(frozen=True)
class AwsForceNew:
    """One AWS type: its Terraform resource and the source it was read from, the input paths whose
    change replaces it, the paths that replace it only under ``condition``, and whether it lives in
    a region."""

    terraform: str
    source: str
    """``path@commit`` (or ``@copy:<id>`` for a version the store gave without its commit)."""
    paths: tuple[str, ...]
    conditional: tuple[tuple[str, str], ...] = ()
    regional: bool = True


SOURCE_REPOSITORY = "hashicorp/terraform-provider-aws"

READ_BEYOND_RECORD: frozenset[str] = frozenset({
    # issue 35 (the training images): read from the same repository file by file on 2026-12-05, not in
    # shared/reference/terraform-provider-aws/force-new.json: the log group's name, name_prefix and
    # log_group_class are ForceNew (SDK schema); the lifecycle configuration's bucket and
    # expected_bucket_owner are RequiresReplace (framework schema); both regional
    'aws:cloudwatch/logGroup:LogGroup',
    'aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration',
    # issue 55 (the S3 gateway endpoint): read 2026-12-06 at the commit in its source; ForceNew in the
    # SDK schema, private_dns_enabled replaced by CustomizeDiff on an endpoint not of Interface type
    'aws:ec2/vpcEndpoint:VpcEndpoint',
})
"""Types read from the provider's source after the shared record was made (the source of each is
its ``source``); the record's own types are exactly the others."""

FORCE_NEW: dict[str, AwsForceNew] = {
    'aws:autoscaling/schedule:Schedule': AwsForceNew(
        'aws_autoscaling_schedule',
        'internal/service/autoscaling/schedule.go@1049654fb0818bacf8518f017816daafa8a8ad8e',
        ('autoscalingGroupName', 'scheduledActionName'),
    ),
    'aws:cloudwatch/eventRule:EventRule': AwsForceNew(
        'aws_cloudwatch_event_rule',
        'internal/service/events/rule.go@0cdab4ae09a963535e03dde0bff4784afe8e3517',
        ('eventBusName', 'name', 'namePrefix'),
    ),
    'aws:cloudwatch/eventTarget:EventTarget': AwsForceNew(
        'aws_cloudwatch_event_target',
        'internal/service/events/target.go@0762c41e2027fcd3cb8340d3e6886c6975fc0a59',
        ('eventBusName', 'rule', 'targetId'),
    ),
    'aws:cloudwatch/logGroup:LogGroup': AwsForceNew(
        'aws_cloudwatch_log_group',
        'internal/service/logs/group.go@0073593e7d6993ba482409f4dc35438daaa79bb3',
        ('logGroupClass', 'name', 'namePrefix'),
    ),
    'aws:codebuild/project:Project': AwsForceNew(
        'aws_codebuild_project',
        'internal/service/codebuild/project.go@00a35305dc1b297a6fcdecdfbba33f1e63c3da39',
        ('name',),
    ),
    'aws:ec2/eip:Eip': AwsForceNew(
        'aws_eip',
        'internal/service/ec2/ec2_eip.go@01606926a0c0ab9174aec440f976a48b0baee722',
        ('address', 'domain', 'ipamPoolId', 'networkBorderGroup', 'publicIpv4Pool'),
    ),
    'aws:ec2/internetGateway:InternetGateway': AwsForceNew(
        'aws_internet_gateway',
        'internal/service/ec2/vpc_internet_gateway.go@08923b68b5ad6fcfdd38362fb5247e39a9b07add',
        (),
    ),
    'aws:ec2/launchTemplate:LaunchTemplate': AwsForceNew(
        'aws_launch_template',
        'internal/service/ec2/ec2_launch_template.go@025e4f81cab8553cb052aebfcc5987e2aa8c702a',
        ('name', 'namePrefix'),
    ),
    'aws:ec2/natGateway:NatGateway': AwsForceNew(
        'aws_nat_gateway',
        'internal/service/ec2/vpc_nat_gateway.go@copy:5469497972',
        ('allocationId', 'availabilityMode', 'connectivityType', 'privateIp', 'subnetId', 'vpcId'),
        (
            ('availabilityZoneAddresses', 'validateRegionalNATGatewayAvailabilityZoneAddress (regional mode): replaced (ForceNew on the computed regional_nat_gateway_auto_mode) when availability_zone_address goes from empty to non-empty or back, i.e. switching between auto and manual AZ mode; other changes in place'),
        ),
    ),
    'aws:ec2/placementGroup:PlacementGroup': AwsForceNew(
        'aws_placement_group',
        'internal/service/ec2/ec2_placement_group.go@05e34de7342261989674cfe1f047c25bb4c80db8',
        ('name', 'partitionCount', 'spreadLevel', 'strategy'),
    ),
    'aws:ec2/route:Route': AwsForceNew(
        'aws_route',
        'internal/service/ec2/vpc_route.go@0128541e0711766f28540143a9d73738aced60aa',
        ('destinationCidrBlock', 'destinationIpv6CidrBlock', 'destinationPrefixListId', 'routeTableId'),
    ),
    'aws:ec2/routeTable:RouteTable': AwsForceNew(
        'aws_route_table',
        'internal/service/ec2/vpc_route_table.go@022092419b7cda11527df3c6b51cbfe1876c1722',
        ('vpcId',),
    ),
    'aws:ec2/routeTableAssociation:RouteTableAssociation': AwsForceNew(
        'aws_route_table_association',
        'internal/service/ec2/vpc_route_table_association.go@0be71beb458ad8875e0acc5c91519c0ceeb214aa',
        ('gatewayId', 'subnetId'),
    ),
    'aws:ec2/securityGroup:SecurityGroup': AwsForceNew(
        'aws_security_group',
        'internal/service/ec2/vpc_security_group.go@01606926a0c0ab9174aec440f976a48b0baee722',
        ('description', 'name', 'namePrefix', 'vpcId'),
    ),
    'aws:ec2/subnet:Subnet': AwsForceNew(
        'aws_subnet',
        'internal/service/ec2/vpc_subnet.go@00cda125a19d31754cb0d073cf551264c57955cb',
        ('availabilityZone', 'availabilityZoneId', 'cidrBlock', 'ipv4IpamPoolId', 'ipv4NetmaskLength', 'ipv6IpamPoolId', 'ipv6Native', 'ipv6NetmaskLength', 'outpostArn', 'vpcId'),
        (
            ('ipv6CidrBlock', 'customdiff.ForceNewIf: replaced when ipv6_cidr_block changes and the subnet had assign_ipv6_address_on_creation = true; otherwise the IPv6 CIDR association is modified in place'),
        ),
    ),
    'aws:ec2/vpcEndpoint:VpcEndpoint': AwsForceNew(
        'aws_vpc_endpoint',
        'internal/service/ec2/vpc_endpoint.go@008db85aad5e56627b1eecab8830464a282552ed',
        ('dnsOptions.privateDnsPreference', 'dnsOptions.privateDnsSpecifiedDomains', 'resourceConfigurationArn', 'serviceName',
         'serviceNetworkArn', 'serviceRegion', 'vpcEndpointType', 'vpcId'),
        (
            ('privateDnsEnabled', 'CustomizeDiff: replaced when private_dns_enabled changes on an endpoint whose vpc_endpoint_type is not Interface (a Gateway endpoint); modified in place on an Interface endpoint'),
        ),
    ),
    'aws:ec2/vpc:Vpc': AwsForceNew(
        'aws_vpc',
        'internal/service/ec2/vpc_.go@00081ce41cc691433ac19bf42227cdabffd0454d',
        ('cidrBlock', 'ipv4IpamPoolId', 'ipv4NetmaskLength'),
        (
            ('instanceTenancy', 'resourceVPCCustomizeDiff: ForceNew on any change except dedicated -> default (that one is ModifyVpcTenancy in place)'),
        ),
    ),
    'aws:ecr/lifecyclePolicy:LifecyclePolicy': AwsForceNew(
        'aws_ecr_lifecycle_policy',
        'internal/service/ecr/lifecycle_policy.go@00a35305dc1b297a6fcdecdfbba33f1e63c3da39',
        ('policy', 'repository'),
    ),
    'aws:ecr/pullThroughCacheRule:PullThroughCacheRule': AwsForceNew(
        'aws_ecr_pull_through_cache_rule',
        'internal/service/ecr/pull_through_cache_rule.go@0509e60e8e895c393eb27fcebb30cceceff51528',
        ('ecrRepositoryPrefix', 'upstreamRegistryUrl', 'upstreamRepositoryPrefix'),
    ),
    'aws:ecr/repository:Repository': AwsForceNew(
        'aws_ecr_repository',
        'internal/service/ecr/repository.go@0072eea2d6046230a1fb7717741c17fd2122175e',
        ('encryptionConfigurations', 'encryptionConfigurations[*].encryptionType', 'encryptionConfigurations[*].kmsKey', 'name'),
    ),
    'aws:eks/accessEntry:AccessEntry': AwsForceNew(
        'aws_eks_access_entry',
        'internal/service/eks/access_entry.go@01f431114674c27cf790fafb67ac274bf8f765e1',
        ('clusterName', 'principalArn', 'type'),
    ),
    'aws:eks/accessPolicyAssociation:AccessPolicyAssociation': AwsForceNew(
        'aws_eks_access_policy_association',
        'internal/service/eks/access_policy_association.go@01f431114674c27cf790fafb67ac274bf8f765e1',
        ('accessScope', 'accessScope.namespaces', 'accessScope.type', 'clusterName', 'policyArn', 'principalArn'),
    ),
    'aws:eks/addon:Addon': AwsForceNew(
        'aws_eks_addon',
        'internal/service/eks/addon.go@00a35305dc1b297a6fcdecdfbba33f1e63c3da39',
        ('addonName', 'clusterName'),
    ),
    'aws:eks/cluster:Cluster': AwsForceNew(
        'aws_eks_cluster',
        'internal/service/eks/cluster.go@copy:4997342113',
        ('accessConfig.bootstrapClusterCreatorAdminPermissions', 'bootstrapSelfManagedAddons', 'kubernetesNetworkConfig.ipFamily', 'kubernetesNetworkConfig.serviceIpv4Cidr', 'name', 'outpostConfig.controlPlaneInstanceType', 'outpostConfig.controlPlanePlacement.groupName', 'roleArn'),
        (
            ('encryptionConfig', 'customdiff.ForceNewIfChange: replaced only when encryption_config goes from one block to none (envelope encryption cannot be disabled); adding it is in place'),
            ('computeConfig.nodeRoleArn', 'validateAutoModeComputeConfigCustomizeDiff: replaced when an existing non-empty node_role_arn changes to a different value; not when a role is first added, nor when the new config disables auto mode (enabled=false) or empties node_pools with the role unset'),
        ),
    ),
    'aws:eks/nodeGroup:NodeGroup': AwsForceNew(
        'aws_eks_node_group',
        'internal/service/eks/node_group.go@012e0a32f0686212f447447fd3d81c3d0ce256ad',
        ('amiType', 'capacityType', 'clusterName', 'diskSize', 'instanceTypes', 'launchTemplate.id', 'launchTemplate.name', 'nodeGroupName', 'nodeGroupNamePrefix', 'nodeRoleArn', 'remoteAccess', 'remoteAccess.ec2SshKey', 'remoteAccess.sourceSecurityGroupIds', 'subnetIds'),
    ),
    'aws:eks/podIdentityAssociation:PodIdentityAssociation': AwsForceNew(
        'aws_eks_pod_identity_association',
        'internal/service/eks/pod_identity_association.go@00a35305dc1b297a6fcdecdfbba33f1e63c3da39',
        ('clusterName', 'namespace', 'serviceAccount'),
    ),
    'aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation': AwsForceNew(
        'aws_fsx_data_repository_association',
        'internal/service/fsx/data_repository_association.go@0a77465627efb9003f87978f901d1a4004a2fc09',
        ('dataRepositoryPath', 'fileSystemId', 'fileSystemPath'),
    ),
    'aws:fsx/lustreFileSystem:LustreFileSystem': AwsForceNew(
        'aws_fsx_lustre_file_system',
        'internal/service/fsx/lustre_file_system.go@copy:1348326974',
        ('backupId', 'copyTagsToBackups', 'deploymentType', 'driveCacheType', 'exportPath', 'fileSystemTypeVersion', 'importPath', 'importedFileChunkSize', 'kmsKeyId', 'securityGroupIds', 'storageType', 'subnetIds'),
        (
            ('storageCapacity', 'resourceLustreFileSystemStorageCapacityCustomizeDiff: replaced when storage_capacity decreases, or on any change when deployment_type is SCRATCH_1; increases on other deployment types are in place'),
            ('metadataConfiguration.iops', 'resourceLustreFileSystemMetadataConfigCustomizeDiff: replaced when iops decreases while metadata_configuration.mode is USER_PROVISIONED'),
        ),
    ),
    'aws:iam/instanceProfile:InstanceProfile': AwsForceNew(
        'aws_iam_instance_profile',
        'internal/service/iam/instance_profile.go@013f1736b90439e5a19567a87d3e5cd11858c420',
        ('name', 'namePrefix', 'path'),
        regional=False,
    ),
    'aws:iam/role:Role': AwsForceNew(
        'aws_iam_role',
        'internal/service/iam/role.go@0040ea6911af00bea2cca6dbb14e86829826ad8e',
        ('name', 'namePrefix', 'path'),
        regional=False,
    ),
    'aws:iam/rolePolicy:RolePolicy': AwsForceNew(
        'aws_iam_role_policy',
        'internal/service/iam/role_policy.go@02f97af85f89a04e8ed89f5e8b64a9a67f3cfe07',
        ('name', 'namePrefix', 'role'),
        regional=False,
    ),
    'aws:iam/rolePolicyAttachment:RolePolicyAttachment': AwsForceNew(
        'aws_iam_role_policy_attachment',
        'internal/service/iam/role_policy_attachment.go@04c79849dbe7fbe76c3054b364357bcdaade9ac5',
        ('policyArn', 'role'),
        regional=False,
    ),
    'aws:kms/key:Key': AwsForceNew(
        'aws_kms_key',
        'internal/service/kms/key.go@00a35305dc1b297a6fcdecdfbba33f1e63c3da39',
        ('customKeyStoreId', 'customerMasterKeySpec', 'keyUsage', 'multiRegion', 'xksKeyId'),
    ),
    'aws:s3/bucket:Bucket': AwsForceNew(
        'aws_s3_bucket',
        'internal/service/s3/bucket.go@copy:1518242462',
        ('bucket', 'bucketPrefix', 'objectLockConfiguration.objectLockEnabled', 'objectLockEnabled'),
    ),
    'aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration': AwsForceNew(
        'aws_s3_bucket_lifecycle_configuration',
        'internal/service/s3/bucket_lifecycle_configuration.go@01606926a0c0ab9174aec440f976a48b0baee722',
        ('bucket', 'expectedBucketOwner'),
    ),
    'aws:s3/bucketObjectv2:BucketObjectv2': AwsForceNew(
        'aws_s3_object',
        'internal/service/s3/object.go@033c721bf1eda7db79395cd73acb54c7efa57ffc',
        ('bucket', 'key'),
    ),
    'aws:s3/bucketOwnershipControls:BucketOwnershipControls': AwsForceNew(
        'aws_s3_bucket_ownership_controls',
        'internal/service/s3/bucket_ownership_controls.go@01c08000ddb14181b5bd19201d8fca311dc570e4',
        ('bucket',),
    ),
    'aws:s3/bucketPolicy:BucketPolicy': AwsForceNew(
        'aws_s3_bucket_policy',
        'internal/service/s3/bucket_policy.go@0073593e7d6993ba482409f4dc35438daaa79bb3',
        ('bucket',),
    ),
    'aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock': AwsForceNew(
        'aws_s3_bucket_public_access_block',
        'internal/service/s3/bucket_public_access_block.go@01606926a0c0ab9174aec440f976a48b0baee722',
        ('bucket',),
    ),
    'aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration': AwsForceNew(
        'aws_s3_bucket_server_side_encryption_configuration',
        'internal/service/s3/bucket_server_side_encryption_configuration.go@01606926a0c0ab9174aec440f976a48b0baee722',
        ('bucket', 'expectedBucketOwner'),
    ),
    'aws:s3/bucketVersioning:BucketVersioning': AwsForceNew(
        'aws_s3_bucket_versioning',
        'internal/service/s3/bucket_versioning.go@01c08000ddb14181b5bd19201d8fca311dc570e4',
        ('bucket', 'expectedBucketOwner'),
    ),
    'aws:sqs/queue:Queue': AwsForceNew(
        'aws_sqs_queue',
        'internal/service/sqs/queue.go@00a35305dc1b297a6fcdecdfbba33f1e63c3da39',
        ('fifoQueue', 'name', 'namePrefix'),
    ),
    'aws:sqs/queuePolicy:QueuePolicy': AwsForceNew(
        'aws_sqs_queue_policy',
        'internal/service/sqs/queue_policy.go@0148137dc6fb802b97b74036846777ab15c0f9ad',
        ('queueUrl',),
    ),
    'aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule': AwsForceNew(
        'aws_vpc_security_group_egress_rule',
        'internal/service/ec2/vpc_security_group_egress_rule.go@050ac11163cab8cdae5936a7f40b0e528ff780df',
        ('securityGroupId',),
        (
            ('cidrIpv4', "ModifyPlan (shared base) sets RequiresReplace when the rule's source kind changes; a new value of the same kind is in place"),
            ('cidrIpv6', "ModifyPlan (shared base) sets RequiresReplace when the rule's source kind changes; a new value of the same kind is in place"),
            ('prefixListId', "ModifyPlan (shared base) sets RequiresReplace when the rule's source kind changes; a new value of the same kind is in place"),
            ('referencedSecurityGroupId', "ModifyPlan (shared base) sets RequiresReplace when the rule's source kind changes; a new value of the same kind is in place"),
        ),
    ),
    'aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule': AwsForceNew(
        'aws_vpc_security_group_ingress_rule',
        'internal/service/ec2/vpc_security_group_ingress_rule.go@copy:1359123306',
        ('securityGroupId',),
        (
            ('cidrIpv4', "ModifyPlan sets RequiresReplace when the rule's source kind changes (e.g. cidr_ipv4 -> referenced_security_group_id); a new value of the same kind is in place"),
            ('cidrIpv6', "ModifyPlan sets RequiresReplace when the rule's source kind changes (e.g. cidr_ipv4 -> referenced_security_group_id); a new value of the same kind is in place"),
            ('prefixListId', "ModifyPlan sets RequiresReplace when the rule's source kind changes (e.g. cidr_ipv4 -> referenced_security_group_id); a new value of the same kind is in place"),
            ('referencedSecurityGroupId', "ModifyPlan sets RequiresReplace when the rule's source kind changes (e.g. cidr_ipv4 -> referenced_security_group_id); a new value of the same kind is in place"),
        ),
    ),
}
"""Every AWS type the stacks create (and the ones planned next), by Pulumi type token."""
