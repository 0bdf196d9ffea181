package engine_test

import (
	"encoding/json"
	"fmt"

	"github.com/objectstack-fleet/reconciler/drivers/engine"
)

func ExampleReferences() {
	body := json.RawMessage(`{"datasource":"crm","fields":[
		{"name":"owner","type":"lookup","reference":"users"},
		{"name":"parent","type":"lookup","reference":"account"},
		{"name":"manager","type":"lookup","reference":"users"}]}`)
	objects, datasource, err := engine.References("object", body)
	fmt.Println(objects, datasource, err)

	_, _, err = engine.References("view", json.RawMessage(`{"object":42}`))
	fmt.Println(err)
	// Output:
	// [users account] crm <nil>
	// object must be a string
}
