"""One blob store for large payloads and for files: a local directory, S3 (or MinIO, any S3 API) or GCS.

One backend per module: `local` (directory), `s3`, `gcs`, behind the `ObjectClient` of `objects`; `stores`
chooses one from configuration, `drivers` wraps its payload driver, `files` keeps tool files, `codec` encrypts
and `converter` is the data converter every client and worker uses.

Configured by one setting, `DAGENT_STORE`:
- empty (default): the local directory `DAGENT_PAYLOAD_DIR` (payloads) and `DAGENT_FILE_DIR` (files);
  every client and worker must share it (same machine or a shared volume);
- `s3://bucket`: `temporalio.contrib.aws.s3driver` with the SDK's aioboto3 client. Credentials and region
  come from the usual AWS variables (read by botocore); `DAGENT_S3_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`)
  points it at MinIO or another S3-compatible server (path-style addressing);
- `gs://bucket`: `temporalio.contrib.gcp.gcsdriver` with the SDK's gcloud-aio-storage client (which reads
  `STORAGE_EMULATOR_HOST` itself, for an emulator).

Objects share one layout: payloads under `v0/ns/<namespace>/wt/<type>/wi/<workflow id>/...` (the SDK
drivers' layout, also used for the directory) and files under `v0/ns/<namespace>/files/wi/<prompt id>/...`,
so a lifecycle rule or the `dagent store sweep` command can remove a closed workflow's blobs by prefix.

Errors name the store and the key. A blob that does not exist fails the workflow for good with
`PayloadBlobMissing` (nothing can bring it back); a store that cannot be reached makes the task retry
(the prompt waits) with the reason in the workflow task failure.
"""
