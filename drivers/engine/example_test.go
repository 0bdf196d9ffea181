package engine_test

import (
	"encoding/json"
	"fmt"

	"github.com/objectstack-fleet/reconciler/drivers/engine"
)

func ExampleCompile() {
	body := json.RawMessage(`{"name":"task","datasource":"crm","fields":{
		"subject":{"type":"text"},
		"owner":{"type":"lookup","reference":"users"},
		"account":{"type":"master_detail","reference":"account"},
		"manager":{"type":"lookup","reference":"users"}}}`)
	it, err := engine.Compile("object", "task", body)
	fmt.Println(it.Refs, it.Datasource, len(it.Fields), err)

	_, err = engine.Compile("object", "task", json.RawMessage(`{"fields":[{"name":"subject"}]}`))
	fmt.Println(err)
	_, err = engine.Compile("view", "all", json.RawMessage(`{"object":42}`))
	fmt.Println(err)
	// Output:
	// [datasource crm object account object users] crm 4 <nil>
	// fields must be a JSON object, not an array
	// object must be a string, not a number
}
