package checkpoint

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configure an S3 store. Open fills them from an s3:// URL and
// the standard AWS variables.
type S3Options struct {
	// Bucket must exist. Required.
	Bucket string
	// Prefix is prepended (with a "/") to every key, so that several
	// applications or environments share a bucket. Default: none.
	Prefix string
	// Endpoint is the S3 service's URL, e.g. "http://127.0.0.1:7070" or
	// "https://s3.eu-west-1.amazonaws.com"; a scheme of http turns TLS off.
	// Default: "https://s3.amazonaws.com".
	Endpoint string
	// AccessKey and SecretKey are static credentials. Default (both
	// empty): the AWS chain: the environment, ~/.aws/credentials, then
	// the instance's IAM role.
	AccessKey, SecretKey string
	// Region is the bucket's region. Default: asked of the service.
	Region string
}

// S3 is a Store in an S3 bucket (AWS or any S3-compatible service),
// through the minio-go client.
type S3 struct {
	cl     *minio.Client
	bucket string
	prefix string // "" or ending in "/"
}

var _ Store = (*S3)(nil)

// NewS3 returns the store that opts describe. It makes no request: see
// CheckBucket.
func NewS3(opts S3Options) (*S3, error) {
	if opts.Bucket == "" {
		return nil, fmt.Errorf("%w: no S3 bucket; name one, e.g. s3://my-bucket/eddy", ErrBadURL)
	}
	if opts.Endpoint == "" {
		opts.Endpoint = "https://s3.amazonaws.com"
	}
	// Endpoints without a scheme ("host:port") are common in S3 tools'
	// configuration; they mean TLS.
	if !strings.Contains(opts.Endpoint, "://") {
		opts.Endpoint = "https://" + opts.Endpoint
	}
	ep, err := url.Parse(opts.Endpoint)
	if err != nil || ep.Host == "" || (ep.Scheme != "http" && ep.Scheme != "https") || (ep.Path != "" && ep.Path != "/") {
		return nil, fmt.Errorf("%w: S3 endpoint %q: set AWS_ENDPOINT_URL to a URL like http://127.0.0.1:7070 or https://s3.eu-west-1.amazonaws.com (scheme and host, no path)", ErrBadURL, opts.Endpoint)
	}
	if (opts.AccessKey == "") != (opts.SecretKey == "") {
		return nil, fmt.Errorf("%w: S3 credentials: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither (to use ~/.aws/credentials or an IAM role)", ErrBadURL)
	}
	var creds *credentials.Credentials
	if opts.AccessKey != "" {
		creds = credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, os.Getenv("AWS_SESSION_TOKEN"))
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	cl, err := minio.New(ep.Host, &minio.Options{
		Creds:  creds,
		Secure: ep.Scheme == "https",
		Region: opts.Region,
		// Path-style requests for anything but AWS (minio-go's automatic
		// choice), so a local service needs no wildcard DNS.
		BucketLookup: minio.BucketLookupAuto,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: S3 client for %s: %w", opts.Endpoint, err)
	}
	prefix := strings.Trim(opts.Prefix, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("%w: S3 prefix: %w", ErrBadURL, err)
		}
		prefix += "/"
	}
	return &S3{cl: cl, bucket: opts.Bucket, prefix: prefix}, nil
}

// CheckBucket verifies that the bucket exists and the credentials reach it.
func (s *S3) CheckBucket(ctx context.Context) error {
	ok, err := s.cl.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("checkpoint: S3 bucket %s at %s: %w; check AWS_ENDPOINT_URL, AWS_REGION and the credentials", s.bucket, s.cl.EndpointURL(), err)
	}
	if !ok {
		return fmt.Errorf("checkpoint: S3 bucket %s does not exist at %s; create it (eddy does not create buckets)", s.bucket, s.cl.EndpointURL())
	}
	return nil
}

func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	_, err := s.cl.PutObject(ctx, s.bucket, s.prefix+key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return fmt.Errorf("checkpoint: put s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	return nil
}

func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	obj, err := s.cl.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err == nil {
		// GetObject is lazy: Stat sends the request and reports a
		// missing key now rather than at the first Read.
		_, err = obj.Stat()
	}
	if err != nil {
		if obj != nil {
			obj.Close()
		}
		if isNotFound(err) {
			return nil, fmt.Errorf("checkpoint: get s3://%s/%s%s: %w", s.bucket, s.prefix, key, ErrNotFound)
		}
		return nil, fmt.Errorf("checkpoint: get s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	return obj, nil
}

func isNotFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NotFound"
}

func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine if we return early
	var objs []Object
	for o := range s.cl.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("checkpoint: list s3://%s/%s%s: %w", s.bucket, s.prefix, prefix, o.Err)
		}
		key, ok := strings.CutPrefix(o.Key, s.prefix)
		if !ok || strings.HasSuffix(key, "/") {
			continue // a directory marker some tools create
		}
		objs = append(objs, Object{Key: key, Size: o.Size, Modified: o.LastModified})
	}
	return objs, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.cl.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("checkpoint: delete s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	return nil
}
