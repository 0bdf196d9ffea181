package ossecret_test

import (
	"errors"
	"fmt"

	"github.com/objectstack-fleet/reconciler/internal/ossecret"
)

func Example() {
	key, err := ossecret.ParseKey("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	if err != nil {
		panic(err)
	}
	// A row as the platform's LocalCryptoProvider wrote it.
	row := ossecret.Sealed{
		ID:         "sec_15e73904fdc16f2960f259d24508af58",
		Namespace:  "datasource",
		Key:        "crm",
		KMSKeyID:   "local:v1",
		Alg:        "aes-256-gcm",
		Ciphertext: "AsO5WtJTO45ygbYHyCer4LBNph0TPbGvPs5CvCJ/mJwop1etpq6V12Mlor4=",
	}
	password, err := ossecret.Decrypt(key, row)
	fmt.Println(password, err)

	row.KMSKeyID = "aws-kms:alias/prod"
	_, err = ossecret.Decrypt(key, row)
	fmt.Println(errors.Is(err, ossecret.ErrUnsupported), err)
	// Output:
	// s3cret-Passw0rd! <nil>
	// true secret "sec_15e73904fdc16f2960f259d24508af58": unsupported secret: external KMS "aws-kms:alias/prod" not supported
}
